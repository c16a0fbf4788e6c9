"""HTTP routers, one module per resource."""
