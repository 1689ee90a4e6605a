// nncanon encyclopedia. Material's navigation.instant swaps pages without a reload, so anything
// done per page hooks document$ (it emits on every page load). The diagram's interactivity
// (picking a block, pinning a part's card) comes with its own change; for now this only marks
// which part of a diagram the URL's hash names, so a link to #part-... shows it.
document$.subscribe(function () {
  var id = decodeURIComponent(location.hash.slice(1));
  document.querySelectorAll(".nc-part.nc-target").forEach(function (el) {
    el.classList.remove("nc-target");
  });
  if (id) {
    var el = document.getElementById(id);
    if (el && el.classList.contains("nc-part")) el.classList.add("nc-target");
  }
});
