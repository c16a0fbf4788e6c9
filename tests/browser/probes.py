"""Scripts injected into pages from outside their own code, shared by the browser tests and benchmarks."""

# Injected before the page's own scripts: the first animation frame after the one in which the graph's plot div
# has its axes drawn is the graph's first painted frame, in ms since navigation start.
PAINT_PROBE = """(() => {
  let seen = false;
  const tick = () => {
    if (seen) { window.__graphPaintedMs = performance.now(); return; }
    const gd = document.getElementById("graph");
    seen = Boolean(gd && gd.querySelector(".main-svg .cartesianlayer .xtick"));
    requestAnimationFrame(tick);
  };
  requestAnimationFrame(tick);
})();"""
