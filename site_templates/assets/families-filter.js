// The families index: toggling trait buttons keeps the rows that have every pressed trait.
(function () {
  function init() {
    var filter = document.querySelector(".nc-trait-filter");
    if (!filter || filter.dataset.ready) return;
    filter.dataset.ready = "1";
    var rows = Array.prototype.slice.call(document.querySelectorAll("table.nc-families tbody tr"));
    var count = filter.querySelector(".nc-trait-count");
    function apply() {
      var wanted = Array.prototype.slice.call(filter.querySelectorAll('.nc-trait[aria-pressed="true"]'))
        .map(function (b) { return b.dataset.trait; });
      var shown = 0;
      rows.forEach(function (row) {
        var traits = row.dataset.traits.split("|");
        var keep = wanted.every(function (t) { return traits.indexOf(t) >= 0; });
        row.hidden = !keep;
        if (keep) shown += 1;
      });
      count.textContent = wanted.length ? shown + " of " + rows.length + " families" : "";
    }
    filter.addEventListener("click", function (event) {
      var button = event.target.closest(".nc-trait");
      if (!button) return;
      button.setAttribute("aria-pressed", button.getAttribute("aria-pressed") === "true" ? "false" : "true");
      apply();
    });
    apply();
  }
  if (window.document$ && window.document$.subscribe) {
    window.document$.subscribe(init);
  } else {
    document.addEventListener("DOMContentLoaded", init);
  }
})();
