// The families index and the Coverage page: facet buttons filter the rows. A row matches a facet when it has
// any pressed term of it (OR within a facet) and must match every facet with a pressed term (AND across
// facets); a family's row carries the broader terms its own imply (families_index.PARENTS). Each button
// counts the rows the filter would show with it chosen, so the counts follow the other groups' choices.
// The pressed terms live in the URL (?mlp=mixture%20of%20experts&attention=q%2Fk%20norms), so a filtered
// view can be linked and survives reload.
(function () {
  function init() {
    var form = document.querySelector(".nc-facets");
    if (!form || form.dataset.ready) return;
    form.dataset.ready = "1";
    // here, not an onsubmit= attribute: no page carries an event handler attribute (generator/site/html_guard.py)
    form.addEventListener("submit", function (e) { e.preventDefault(); });
    var buttons = Array.prototype.slice.call(form.querySelectorAll(".nc-trait"));
    var rows = Array.prototype.slice.call(document.querySelectorAll("table.nc-families tbody tr"));
    var noun = form.dataset.noun || "families";  // the Coverage page counts model types
    var count = form.querySelector(".nc-trait-count");
    var clear = form.querySelector(".nc-facet-clear");

    function wanted() {
      var byFacet = {};
      buttons.forEach(function (b) {
        if (b.getAttribute("aria-pressed") !== "true") return;
        (byFacet[b.dataset.facet] = byFacet[b.dataset.facet] || []).push(b.dataset.term);
      });
      return byFacet;
    }
    function writeUrl(byFacet) {
      var params = new URLSearchParams(window.location.search);
      buttons.forEach(function (b) { params.delete(b.dataset.facet); });
      Object.keys(byFacet).forEach(function (facet) {
        byFacet[facet].forEach(function (term) { params.append(facet, term); });
      });
      var query = params.toString();
      history.replaceState(history.state, "", window.location.pathname + (query ? "?" + query : "") + window.location.hash);
    }
    function matching(row, byFacet, except) {
      return Object.keys(byFacet).every(function (facet) {
        if (facet === except) return true;
        var has = (row.dataset[facet] || "").split("|");
        return byFacet[facet].some(function (term) { return has.indexOf(term) >= 0; });
      });
    }
    function apply(updateUrl) {
      var byFacet = wanted();
      var facetsPressed = Object.keys(byFacet);
      var shown = 0;
      rows.forEach(function (row) {
        var keep = matching(row, byFacet, null);
        row.hidden = !keep;
        if (keep) shown += 1;
      });
      // each term's count: the families shown if it were chosen, the other groups' choices kept
      buttons.forEach(function (b) {
        var n = rows.filter(function (row) {
          return matching(row, byFacet, b.dataset.facet) && (row.dataset[b.dataset.facet] || "").split("|").indexOf(b.dataset.term) >= 0;
        }).length;
        b.querySelector(".nc-count").textContent = n;
      });
      count.textContent = facetsPressed.length ? shown + " of " + rows.length + " " + noun : "";
      clear.hidden = !facetsPressed.length;
      if (updateUrl) writeUrl(byFacet);
    }
    var params = new URLSearchParams(window.location.search);
    buttons.forEach(function (b) {
      if (params.getAll(b.dataset.facet).indexOf(b.dataset.term) >= 0) b.setAttribute("aria-pressed", "true");
    });
    form.addEventListener("click", function (event) {
      var button = event.target.closest(".nc-trait");
      if (button) {
        button.setAttribute("aria-pressed", button.getAttribute("aria-pressed") === "true" ? "false" : "true");
        apply(true);
      } else if (event.target.closest(".nc-facet-clear")) {
        buttons.forEach(function (b) { b.setAttribute("aria-pressed", "false"); });
        apply(true);
      }
    });
    apply(false);
    sortable(document.querySelector("table.nc-families"));
  }
  // A numeric heading sorts the rows by its column's value (the largest checkpoint's), largest first; a second
  // click reverses. aria-sort tells a screen reader which column orders the table. The order lives in the URL
  // (?sort=layers&order=ascending), as the filter does, so a sorted view can be linked and survives reload.
  function sortable(table) {
    if (!table) return;
    var body = table.tBodies[0];
    var original = Array.prototype.slice.call(body.rows);
    function order(button, descending, updateUrl) {
      var th = button.closest("th");
      var column = Array.prototype.indexOf.call(th.parentNode.children, th);
      table.querySelectorAll("th[aria-sort]").forEach(function (h) { h.setAttribute("aria-sort", "none"); });
      th.setAttribute("aria-sort", descending ? "descending" : "ascending");
      var rows = original.slice().sort(function (a, b) {
        var x = parseFloat(a.cells[column].dataset.value) || 0, y = parseFloat(b.cells[column].dataset.value) || 0;
        return descending ? y - x : x - y;
      });
      rows.forEach(function (row) { body.appendChild(row); });
      if (!updateUrl) return;
      var params = new URLSearchParams(window.location.search);
      params.set("sort", button.dataset.key);
      params.set("order", descending ? "descending" : "ascending");
      history.replaceState(history.state, "", window.location.pathname + "?" + params.toString() + window.location.hash);
    }
    table.querySelectorAll(".nc-sort").forEach(function (button) {
      button.addEventListener("click", function () {
        order(button, button.closest("th").getAttribute("aria-sort") !== "descending", true);
      });
    });
    var params = new URLSearchParams(window.location.search);
    var chosen = params.get("sort") && table.querySelector('.nc-sort[data-key="' + CSS.escape(params.get("sort")) + '"]');
    if (chosen) order(chosen, params.get("order") !== "ascending", false);
  }
  // A table's first column stays in place while the rest scroll sideways under it (nncanon.css): the box's scroll
  // padding is that column's width, so a cell scrolled into view (a sort heading reached by keyboard, a link
  // followed) lands beside it, not under it.
  function stickyPadding() {
    document.querySelectorAll(".nc-families-box").forEach(function (box) {
      var first = box.querySelector("table.nc-families tr > :first-child");
      // only where it is kept in place (on a phone a long first column scrolls with the rest: families.css)
      var sticky = first && getComputedStyle(first).position === "sticky";
      box.style.setProperty("--nc-first-col", sticky ? first.getBoundingClientRect().width + "px" : "0px");
    });
  }
  function start() {
    init();
    stickyPadding();
  }
  window.addEventListener("resize", stickyPadding);
  if (window.document$ && window.document$.subscribe) {
    window.document$.subscribe(start);
  } else {
    document.addEventListener("DOMContentLoaded", start);
  }
})();
