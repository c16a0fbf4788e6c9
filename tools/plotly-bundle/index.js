'use strict';

// Entry of Orchestrace's partial plotly.js bundle: the core (which always carries `scatter`)
// plus the trace types the app draws. Keep this list in step with the figures app/ builds.
var Plotly = require('plotly.js/lib/core');

Plotly.register([
    require('plotly.js/lib/scatter'),
    require('plotly.js/lib/bar'),
    require('plotly.js/lib/heatmap')
]);

module.exports = Plotly;
