// The Compare page (generator/site/compare.py): two families side by side. Each family's compare/<family>.json is
// a projection of its facts; the block diagrams are fetched from the family pages themselves. Every text from a
// file is set as textContent (never parsed as HTML), and a fetched diagram keeps only its SVG, with its ids
// prefixed so two diagrams in one page never share one. The chosen pair lives in the URL (?a=gemma2&b=gemma3_text).
(function () {
  var cache = {};
  function load(url, kind) {
    if (!cache[url]) {
      cache[url] = fetch(url).then(function (r) {
        if (!r.ok) throw new Error(url + ": " + r.status);
        return kind === "json" ? r.json() : r.text();
      });
    }
    return cache[url];
  }
  function el(tag, cls, text) {
    var node = document.createElement(tag);
    if (cls) node.className = cls;
    if (text !== undefined && text !== null) node.textContent = text;
    return node;
  }
  function code(text) { return el("code", null, text); }
  function link(family) {
    var a = el("a", null, family);
    a.href = "../families/" + encodeURIComponent(family) + "/";
    return a;
  }
  function shape(v) { return v ? (v.available ? "[" + v.dims.join(", ") + "]" : "not available") : "—"; }
  function count(n) { return n.toLocaleString("en-US"); }

  function heads(box, pair) {
    box.replaceChildren();
    pair.forEach(function (d, i) {
      var col = el("div", "nc-compare-col");
      var title = el("p", "nc-compare-name");
      title.append(el("span", "nc-compare-side", i ? "B" : "A"), " ", link(d.family));
      if (d.group && d.group !== d.family) title.append(" · " + d.group + " line");
      col.append(title, el("p", "nc-compare-tagline", d.tagline));
      box.append(col);
    });
  }

  function diagrams(box, pair) {
    box.replaceChildren();
    var columns = pair.map(function (d, i) {
      var col = el("div", "nc-compare-col");
      col.append(el("p", "nc-compare-name", (i ? "B: " : "A: ") + d.family));
      box.append(col);
      return col;
    });
    return Promise.all(pair.map(function (d) { return load("../families/" + encodeURIComponent(d.family) + "/", "text"); }))
      .then(function (pages) {
        var docs = pages.map(function (html) { return new DOMParser().parseFromString(html, "text/html"); });
        // a part is its module path and the value it shows: the same pair in the other family's diagrams is the same part
        var key = function (part) { return part.dataset.path + "|" + (part.dataset.value || ""); };
        var drawn = docs.map(function (doc) {
          var own = {};
          doc.querySelectorAll("figure.nc-block-figure .nc-part").forEach(function (part) { own[key(part)] = true; });
          return own;
        });
        docs.forEach(function (doc, i) {
          doc.querySelectorAll("figure.nc-block-figure").forEach(function (figure, k) {
            var svg = figure.querySelector(".nc-narrow svg") || figure.querySelector("svg.nc-block");
            if (!svg) return;
            var prefix = "cmp" + i + "-" + k + "-";
            svg.querySelectorAll("[id]").forEach(function (node) { node.id = prefix + node.id; });
            svg.id = prefix + svg.id;
            svg.querySelectorAll("[marker-end]").forEach(function (node) {
              node.setAttribute("marker-end", node.getAttribute("marker-end").replace("url(#", "url(#" + prefix));
            });
            var lacking = 0;
            svg.querySelectorAll(".nc-part").forEach(function (part) {
              // a drawing here, not a control: the parts' cards live on the family page
              ["tabindex", "role", "aria-pressed"].forEach(function (a) { part.removeAttribute(a); });
              if (!drawn[1 - i][key(part)]) { part.classList.add("nc-compare-only"); lacking += 1; }
            });
            svg.setAttribute("role", "img");
            var caption = figure.querySelector("figcaption");
            var fig = el("figure", "nc-compare-figure");
            var cap = el("figcaption", null, caption ? caption.textContent : "");
            if (lacking) cap.append(el("span", "nc-compare-lacking", " · " + lacking + " outlined: not drawn in " + pair[1 - i].family));
            var scroll = el("div", "nc-compare-drawing");
            scroll.append(document.importNode(svg, true));
            fig.append(cap, scroll);
            columns[i].append(fig);
          });
        });
      });
  }

  function table(name) { return document.querySelector("table.nc-compare-" + name + " tbody"); }
  function row(cells, cls) {
    var tr = el("tr", cls);
    cells.forEach(function (c) {
      var td = el("td");
      if (c instanceof Node) td.append(c); else td.textContent = c;
      tr.append(td);
    });
    return tr;
  }
  function same(of, items, noun) {
    var box = document.querySelector('details.nc-compare-same[data-of="' + of + '"]');
    box.querySelector("summary").textContent = count(items.length) + " " + noun + " the same in both";
    var list = box.querySelector("ul");
    list.replaceChildren();
    items.forEach(function (text) { var li = el("li"); li.append(code(text)); list.append(li); });
  }

  function values(pair) {
    var index = pair.map(function (d) { var m = {}; d.values.forEach(function (v) { m[v.path] = v; }); return m; });
    var order = [];
    pair.forEach(function (d) { d.values.forEach(function (v) { if (order.indexOf(v.path) < 0) order.push(v.path); }); });
    var body = table("values"), shared = [], differ = 0;
    body.replaceChildren();
    order.forEach(function (path) {
      var a = index[0][path], b = index[1][path];
      if (a && b && shape(a) === shape(b)) { shared.push(path); return; }
      differ += 1;
      var cls = !a ? "nc-compare-only-b" : !b ? "nc-compare-only-a" : "nc-compare-differs";
      body.append(row([code(path), shape(a), shape(b)], cls));
    });
    document.querySelector('.nc-compare-count[data-of="values"]').textContent =
      count(differ) + " of " + count(order.length) + " values differ: one family lacks them, or their dims differ.";
    same("values", shared, "values, with their dims,");
  }

  function relations(pair) {
    var key = function (r) { return r.host + ": " + r.text; };
    var index = pair.map(function (d) { var m = {}; d.relations.forEach(function (r) { m[key(r)] = r; }); return m; });
    var body = table("relations"), shared = [], only = 0;
    body.replaceChildren();
    pair.forEach(function (d, i) {
      d.relations.forEach(function (r) {
        var k = key(r);
        if (index[1 - i][k]) { if (i === 0) shared.push(k); return; }
        only += 1;
        body.append(row([code(r.text), code(r.host), (i ? "B: " : "A: ") + d.family], i ? "nc-compare-only-b" : "nc-compare-only-a"));
      });
    });
    document.querySelector('.nc-compare-count[data-of="relations"]').textContent =
      count(only) + " relations proven on one family only; " + count(shared.length) + " on both.";
    same("relations", shared, "relations");
  }

  function mechanics(pair) {
    // both families list the same facets in the same order (the families index's)
    var body = table("mechanics");
    body.replaceChildren();
    pair[0].mechanics.forEach(function (facet, k) {
      var terms = pair.map(function (d) { return d.mechanics[k][1].join(", ") || "—"; });
      body.append(row([facet[0]].concat(terms), terms[0] === terms[1] ? "" : "nc-compare-differs"));
    });
  }

  function checkpoints(pair) {
    var body = table("checkpoints");
    var keys = Array.prototype.map.call(document.querySelectorAll("table.nc-compare-checkpoints th[data-key]"),
                                        function (th) { return th.dataset.key; });
    body.replaceChildren();
    pair.forEach(function (d) {
      d.checkpoints.forEach(function (c) {
        var tr = row([code(c.checkpoint), d.family]);
        keys.forEach(function (k) {
          var td = el("td", "nc-num", c[k] === null || c[k] === undefined ? "—" : count(c[k]));
          tr.append(td);
        });
        body.append(tr);
      });
    });
  }

  function init() {
    var form = document.querySelector(".nc-compare-form");
    if (!form || form.dataset.ready) return;
    form.dataset.ready = "1";
    form.addEventListener("submit", function (e) { e.preventDefault(); });
    var status = document.querySelector(".nc-compare-status");
    var a = form.elements.a, b = form.elements.b;
    var params = new URLSearchParams(window.location.search);
    [[a, "a"], [b, "b"]].forEach(function (pick) {
      var wanted = params.get(pick[1]);
      if (wanted && Array.prototype.some.call(pick[0].options, function (o) { return o.value === wanted; })) pick[0].value = wanted;
    });
    var drawn = 0;
    function draw(updateUrl) {
      var mine = ++drawn;
      if (updateUrl) {
        var query = new URLSearchParams(window.location.search);
        query.set("a", a.value);
        query.set("b", b.value);
        history.replaceState(history.state, "", window.location.pathname + "?" + query.toString() + window.location.hash);
      }
      document.body.dataset.compare = "loading";
      status.textContent = "Loading " + a.value + " and " + b.value + "…";
      Promise.all([a.value, b.value].map(function (f) { return load(encodeURIComponent(f) + ".json", "json"); }))
        .then(function (pair) {
          if (mine !== drawn) return null;
          document.querySelectorAll(".nc-compare-a").forEach(function (th) { th.textContent = "A: " + pair[0].family; });
          document.querySelectorAll(".nc-compare-b").forEach(function (th) { th.textContent = "B: " + pair[1].family; });
          heads(document.querySelector(".nc-compare-heads"), pair);
          values(pair);
          relations(pair);
          mechanics(pair);
          checkpoints(pair);
          return diagrams(document.querySelector(".nc-compare-diagrams"), pair).then(function () {
            if (mine !== drawn) return;
            status.textContent = "A is " + pair[0].family + ", B is " + pair[1].family + ".";
            document.body.dataset.compare = pair[0].family + "|" + pair[1].family;
          });
        })
        .catch(function (err) {
          if (mine !== drawn) return;
          status.textContent = "Could not load the comparison: " + err.message;
          document.body.dataset.compare = "failed";
        });
    }
    a.addEventListener("change", function () { draw(true); });
    b.addEventListener("change", function () { draw(true); });
    form.querySelector(".nc-compare-swap").addEventListener("click", function () {
      var x = a.value; a.value = b.value; b.value = x; draw(true);
    });
    draw(false);
  }
  if (window.document$ && window.document$.subscribe) {
    window.document$.subscribe(init);
  } else {
    document.addEventListener("DOMContentLoaded", init);
  }
})();
