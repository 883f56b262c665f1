(function () {
  "use strict";
  var body = document.body;
  var errors = [];
  var errorBox = document.getElementById("report-errors");
  function recordError(message) {
    errors.push(String(message));
    body.dataset.errors = String(errors.length);
    if (errorBox) {
      errorBox.hidden = false;
      errorBox.textContent = errors.join("\n");
    }
  }
  body.dataset.errors = "0";
  window.addEventListener("error", function (e) { recordError("error: " + (e.message || e)); });
  window.addEventListener("unhandledrejection", function (e) { recordError("unhandled rejection: " + e.reason); });
  var consoleError = console.error;
  console.error = function () {
    recordError("console.error: " + Array.prototype.join.call(arguments, " "));
    return consoleError.apply(console, arguments);
  };

  var SVG = "http://www.w3.org/2000/svg";
  var PALETTE = ["#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b", "#e377c2", "#17becf", "#bcbd22", "#7f7f7f"];

  function el(name, attrs, parent) {
    var e = document.createElementNS(SVG, name);
    Object.keys(attrs).forEach(function (k) { e.setAttribute(k, attrs[k]); });
    if (parent) parent.appendChild(e);
    return e;
  }
  function text(name, attrs, parent, content) {
    var e = el(name, attrs, parent);
    e.textContent = content;
    return e;
  }
  function niceStep(range, ticks) {
    var raw = range / ticks;
    var p = Math.pow(10, Math.floor(Math.log10(raw)));
    var m = raw / p;
    return (m <= 1 ? 1 : m <= 2 ? 2 : m <= 5 ? 5 : 10) * p;
  }
  function fmt(v) {
    var a = Math.abs(v);
    if (a >= 1e6) return (v / 1e6).toFixed(a >= 1e7 ? 0 : 1) + "M";
    if (a >= 1e3) return (v / 1e3).toFixed(a >= 1e4 ? 0 : 1) + "k";
    if (Math.abs(v - Math.round(v)) < 1e-9) return String(Math.round(v));
    return v.toFixed(a >= 10 ? 0 : a >= 1 ? 1 : 2);
  }

  // A line chart of `chart.series` (values per bucket) over time; returns whether it drew a line.
  function lineChart(box, chart) {
    var series = chart.series || [];
    var n = series.length ? series[0].values.length : 0;
    if (!n) return false;
    var W = Math.max(box.clientWidth || 0, 520), H = 300;
    var m = { l: 70, r: 18, t: 12, b: 46 };
    var pw = W - m.l - m.r, ph = H - m.t - m.b;
    var bucketS = chart.bucket_ns / 1e9;
    var spanS = n * bucketS;
    var ms = spanS < 2;
    var scale = ms ? 1000 : 1;
    var maxY = 0;
    series.forEach(function (s) { s.values.forEach(function (v) { if (v > maxY) maxY = v; }); });
    if (!(maxY > 0)) maxY = 1;
    var yStep = niceStep(maxY, 5), yMax = Math.ceil(maxY / yStep - 1e-9) * yStep;
    var xMax = spanS * scale, xStep = niceStep(xMax, 8);
    function X(t) { return m.l + t / xMax * pw; }
    function Y(v) { return m.t + ph - v / yMax * ph; }
    var svg = el("svg", { viewBox: "0 0 " + W + " " + H, width: "100%", "class": "line-chart", role: "img", "aria-label": chart.title }, box);
    for (var v = 0; v <= yMax + yStep / 1e6; v += yStep) {
      el("line", { x1: m.l, x2: m.l + pw, y1: Y(v), y2: Y(v), "class": "grid" }, svg);
      text("text", { x: m.l - 6, y: Y(v) + 4, "text-anchor": "end" }, svg, fmt(v));
    }
    for (var x = 0; x <= xMax + xStep / 1e6; x += xStep) {
      el("line", { x1: X(x), x2: X(x), y1: m.t + ph, y2: m.t + ph + 5, "class": "axis" }, svg);
      text("text", { x: X(x), y: m.t + ph + 18, "text-anchor": "middle" }, svg, fmt(+x.toPrecision(6)));
    }
    el("line", { x1: m.l, x2: m.l + pw, y1: m.t + ph, y2: m.t + ph, "class": "axis" }, svg);
    el("line", { x1: m.l, x2: m.l, y1: m.t, y2: m.t + ph, "class": "axis" }, svg);
    text("text", { x: m.l + pw / 2, y: H - 8, "text-anchor": "middle", "class": "axis-label" }, svg,
      "time since " + chart.start_label + " (" + (ms ? "ms" : "s") + ")");
    text("text", { x: 16, y: m.t + ph / 2, "text-anchor": "middle", "class": "axis-label",
      transform: "rotate(-90 16 " + (m.t + ph / 2) + ")" }, svg, chart.y_label);
    (chart.markers || []).forEach(function (mk) {
      var mx = X(mk.t_s * scale);
      var line = el("line", { x1: mx, x2: mx, y1: m.t, y2: m.t + ph, "class": "marker" }, svg);
      text("title", {}, line, mk.label);
    });
    var lines = [];
    var drawn = 0;
    series.forEach(function (s, i) {
      var points = s.values.map(function (val, j) {
        return X((j + 0.5) * bucketS * scale).toFixed(1) + "," + Y(val).toFixed(1);
      });
      var line = el("polyline", { points: points.join(" "), fill: "none", stroke: PALETTE[i % PALETTE.length],
        "stroke-width": 2, "stroke-linejoin": "round", "class": "mark" }, svg);
      text("title", {}, line, s.name);
      lines.push(line);
      if (points.length > 0) drawn++;
    });
    var legend = document.createElement("div");
    legend.className = "legend";
    series.forEach(function (s, i) {
      var item = document.createElement("span");
      var swatch = document.createElement("i");
      swatch.style.background = PALETTE[i % PALETTE.length];
      item.appendChild(swatch);
      item.appendChild(document.createTextNode(s.name + " (" + s.total + " spans)"));
      item.title = "click to hide or show";
      item.addEventListener("click", function () {
        var off = item.classList.toggle("off");
        lines[i].style.display = off ? "none" : "";
      });
      legend.appendChild(item);
    });
    if ((chart.markers || []).length) {
      var note = document.createElement("span");
      var dash = document.createElement("i");
      dash.style.background = "#8e44ad";
      note.appendChild(dash);
      note.appendChild(document.createTextNode("phase change (hover the dashed line)"));
      legend.appendChild(note);
    }
    box.appendChild(legend);
    var cursor = el("line", { x1: 0, x2: 0, y1: m.t, y2: m.t + ph, "class": "cursor", visibility: "hidden" }, svg);
    var tip = document.createElement("div");
    tip.className = "tooltip";
    tip.hidden = true;
    box.appendChild(tip);
    svg.addEventListener("mousemove", function (ev) {
      var r = svg.getBoundingClientRect();
      var px = (ev.clientX - r.left) * W / r.width;
      var j = Math.floor((px - m.l) / pw * n);
      if (j < 0 || j >= n) { cursor.setAttribute("visibility", "hidden"); tip.hidden = true; return; }
      var cx = X((j + 0.5) * bucketS * scale);
      cursor.setAttribute("x1", cx);
      cursor.setAttribute("x2", cx);
      cursor.setAttribute("visibility", "visible");
      var from = j * bucketS * scale, to = (j + 1) * bucketS * scale;
      var rows = [fmt(+from.toPrecision(6)) + "–" + fmt(+to.toPrecision(6)) + (ms ? " ms" : " s")];
      series.forEach(function (s) { rows.push(s.name + ": " + fmt(s.values[j]) + " " + chart.unit); });
      tip.textContent = rows.join("\n");
      tip.hidden = false;
      tip.style.left = Math.min(ev.clientX - box.getBoundingClientRect().left + 14, box.clientWidth - 220) + "px";
      tip.style.top = (ev.clientY - box.getBoundingClientRect().top + 10) + "px";
    });
    svg.addEventListener("mouseleave", function () { cursor.setAttribute("visibility", "hidden"); tip.hidden = true; });
    return drawn > 0;
  }

  function run() {
    var data = JSON.parse(document.getElementById("report-data").textContent);
    var drawn = 0;
    var empty = [];
    Array.prototype.forEach.call(document.querySelectorAll("[data-line-chart]"), function (box) {
      var key = box.getAttribute("data-line-chart");
      var ok = false;
      try {
        ok = lineChart(box, data.charts[key]);
      } catch (e) {
        recordError("chart " + key + ": " + e);
      }
      if (ok) drawn++; else empty.push(key);
    });
    Array.prototype.forEach.call(document.querySelectorAll("svg[data-chart]"), function (svg) {
      if (svg.querySelector(".mark")) drawn++; else empty.push(svg.getAttribute("data-chart"));
    });
    body.dataset.charts = String(drawn);
    body.dataset.emptyCharts = empty.join(",");
    body.dataset.rendered = empty.length ? "empty" : "ok";
  }
  try {
    run();
  } catch (e) {
    recordError("report script: " + e);
    body.dataset.rendered = "failed";
  }
})();
