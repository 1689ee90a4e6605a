// nncanon encyclopedia: the family page's events, delegated from document once, and the per-page start.
//
// assets/nncanon.js (loaded first) defines the page's state (window.nncanonPage.Page); this file listens
// for hover, focus, click, keys, the slider, resize and scroll, and starts a page's state on every page
// Material's instant navigation shows: everything per page runs from document$ (it emits on every page),
// and the listeners are registered once, each reading the current page's state from
// window.nncanonPage.current, so initializing a page again only rebuilds its state.
// window.__nncanonReady is the performance.now() at which the page's diagrams became interactive,
// window.__nncanonInitMs what the init took, the fetch of the diagrams' data included (bench/bench_page.py).
(function () {
  "use strict";
  if (window.__nncanonEventsLoaded) return;
  window.__nncanonEventsLoaded = true;

  var shared = window.nncanonPage;
  var all = shared.all;

  // ---------------------------------------------------------------- events (delegated, once)

  function partOf(target) {
    return target && target.closest ? target.closest(".nc-part") : null;
  }

  document.addEventListener("mouseover", function (e) {
    var page = shared.current;
    if (!page) return;
    var part = partOf(e.target);
    if (part) {
      if (page.hover !== part) {
        page.hover = part;
        page.dismissed = false;
        page.update();
      }
      return;
    }
    var row = e.target.closest && e.target.closest(".nc-host tr[data-path]");
    var line = !row && e.target.closest && e.target.closest("pre.nc-printout .line[data-path]");
    if (row || line) page.lightParts((row || line).getAttribute("data-path"));
  });

  document.addEventListener("mouseout", function (e) {
    var page = shared.current;
    if (!page) return;
    var part = partOf(e.target);
    if (part && part === page.hover && partOf(e.relatedTarget) !== part) {
      page.hover = null;
      page.update();
    }
    var row = e.target.closest && e.target.closest(".nc-host tr[data-path], pre.nc-printout .line[data-path]");
    if (row && !(e.relatedTarget && row.contains(e.relatedTarget))) page.clearReverse();
  });

  document.addEventListener("focusin", function (e) {
    var page = shared.current;
    if (!page) return;
    var part = partOf(e.target);
    if (part && page.focus !== part) {
      page.focus = part;
      page.dismissed = false;
      page.update();
    }
  });

  document.addEventListener("focusout", function (e) {
    var page = shared.current;
    if (!page) return;
    var part = partOf(e.target);
    if (part && part === page.focus) {
      page.focus = null;
      page.update();
    }
  });

  // The card's row link is followed as a native fragment navigation, before Material's instant
  // navigation sees the click: Material pushes the hash and scrolls to it later, and a scroll
  // offset it saved (debounced) from a scroll just before the click can land on the new history
  // entry first, so it scrolled back to where the click was instead of to the row.
  window.addEventListener(
    "click",
    function (e) {
      var a = e.target.closest && e.target.closest("a.nc-card-row-link");
      if (!a || e.button !== 0 || e.metaKey || e.ctrlKey || e.shiftKey || e.altKey) return;
      e.preventDefault();
      e.stopPropagation();
      var href = a.getAttribute("href");
      // the row's host may be folded: open it first, so the scroll to it lands where it is shown
      if (window.__nncanonReveal) window.__nncanonReveal(decodeURIComponent(href.slice(1)), false);
      var row = document.getElementById(decodeURIComponent(href.slice(1)));
      // the same hash again is no navigation: scroll to the row by hand
      if (location.hash === href && row) row.scrollIntoView();
      else location.hash = href;
      // a row laid out late on a busy machine (a fold just opened, the page still settling) is not where the
      // scroll aimed: keep it in view from now, whether or not it sits in a fold (the hashchange handler keeps
      // only a folded one, and comes later)
      if (row && window.__nncanonKeepInView) window.__nncanonKeepInView(row);
    },
    true
  );

  document.addEventListener("click", function (e) {
    var page = shared.current;
    if (!page) return;
    var part = partOf(e.target);
    var link = e.target.closest && e.target.closest(".nc-card-line-link");
    if (link && page.showLine()) {
      e.preventDefault();
      return;
    }
    if (e.target.closest && e.target.closest(".nc-card-close")) {
      page.pin(null, true);
      page.dismissed = true; // closed means closed: not shown again for the part still under the finger
      page.update();
      page.saveUrl();
      return;
    }
    if (part) {
      page.pin(page.pinned === part ? null : part);
    } else if (page.pinned && !(e.target.closest && e.target.closest(".nc-card, .nc-picker"))) {
      page.pin(null);
    }
  });

  document.addEventListener("keydown", function (e) {
    var page = shared.current;
    if (!page) return;
    var part = partOf(e.target);
    if (part && (e.key === "Enter" || e.key === " " || e.key === "Spacebar")) {
      e.preventDefault();
      page.pin(page.pinned === part ? null : part);
    } else if (e.key === "Escape" || e.key === "Esc") {
      if (page.pinned || page.active()) {
        page.pin(null, true);
        page.dismissed = true;
        page.update();
        page.saveUrl();
      }
    }
  });

  document.addEventListener("input", function (e) {
    var page = shared.current;
    if (page && e.target.classList && e.target.classList.contains("nc-slider")) {
      page.setBlock(parseInt(e.target.value, 10));
    }
  });

  var queued = false;
  function replaceSoon() {
    if (queued || !shared.current) return;
    queued = true;
    requestAnimationFrame(function () {
      queued = false;
      if (shared.current) shared.current.replace();
    });
  }
  window.addEventListener("resize", replaceSoon);
  document.addEventListener("scroll", replaceSoon, true); // the diagrams scroll in their boxes

  // ---------------------------------------------------------------- per page

  // Material's search is a dialog with no name (axe: aria-dialog-name): name it.
  function nameSearch() {
    all(document, '.md-search[role="dialog"]').forEach(function (d) {
      if (!d.hasAttribute("aria-label") && !d.hasAttribute("aria-labelledby")) d.setAttribute("aria-label", "Search");
    });
  }

  function init() {
    var start = performance.now();
    nameSearch();
    var dataEl = document.getElementById("nc-data");
    if (shared.current) clearTimeout(shared.current.urlTimer);
    shared.current = null;
    window.__nncanonReady = undefined;
    var ready = function () {
      window.__nncanonReady = performance.now();
      window.__nncanonInitMs = window.__nncanonReady - start;
    };
    if (!dataEl) return ready();
    // the diagrams' data is a file of its own (facts/<family>.diagram.json), fetched once the page is shown: a
    // sixth of the page's bytes the first paint does not wait for
    fetch(new URL(dataEl.getAttribute("data-src"), document.baseURI))
      .then(function (response) {
        if (!response.ok) throw new Error(response.status + " " + response.url);
        return response.json();
      })
      .then(function (data) {
        if (!dataEl.isConnected) return; // another page was shown meanwhile: its own init runs
        shared.current = new shared.Page(data);
        shared.current.loadUrl();
        document.documentElement.classList.add("nc-ready");
        ready();
      })
      .catch(function (err) {
        if (!dataEl.isConnected) return;
        shared.current = null;
        console.error("nncanon: the diagrams could not start:", err); // eslint-disable-line no-console
        ready();
      });
  }

  window.nncanonPage.onEveryPage(init);
})();
