// nncanon encyclopedia: page-wide behaviour that is not the diagrams' (those are nncanon.js).
//
// - Every scroll box is reachable by keyboard (axe: scrollable-region-focusable): a box that scrolls
//   (a table wider than a phone, a code block, the printout, the families index) gets tabindex="0",
//   role="region" and a name, unless it is a diagram (its parts are focusable). Which boxes scroll depends on the screen,
//   so this runs on every page, on resize and when a <details> opens; and Material, which makes a
//   code block focusable only on a screen with hover, is undone when it takes that away on touch.
// - Printing opens every collapsed <details> (closed again after), so the paper has it all.
// - The cheat sheet starts closed on a phone.
// - The support tables and relations fold by host: a link to a row opens its host, and a button opens
//   or folds every host of its section.
(function () {
  "use strict";
  if (window.__nncanonPageLoaded) return;
  window.__nncanonPageLoaded = true;

  var BOXES = ".nc-table, .nc-scroll, pre > code, .nc-families-box, .md-typeset__scrollwrap";
  var FOCUSABLE = "a[href], button, input, select, textarea, [tabindex]:not([tabindex='-1'])";

  function all(root, sel) {
    return Array.prototype.slice.call(root.querySelectorAll(sel));
  }

  function scrolls(e) {
    var s = getComputedStyle(e);
    var x = e.scrollWidth > e.clientWidth + 1 && /auto|scroll/.test(s.overflowX);
    var y = e.scrollHeight > e.clientHeight + 1 && /auto|scroll/.test(s.overflowY);
    return x || y;
  }

  // A short name for the box: what it shows, said by the page itself.
  function nameOf(e) {
    var host = e.closest(".nc-host");
    if (host) return "values of " + host.getAttribute("data-path");
    var svg = e.querySelector("svg[aria-label]");
    if (svg) return svg.getAttribute("aria-label");
    if (e.matches("pre > code")) return "code";
    var th = e.querySelector("th");
    var text = th ? th.textContent.replace(/\s+/g, " ").trim() : "";
    return "table" + (text ? ": " + text.slice(0, 60) : "");
  }

  function reach(e) {
    var ours = e.hasAttribute("data-nc-scroll");
    // a diagram's parts are its tab stops; a table's links (the families index's sticky names) are not
    // enough, since reaching them never scrolls the box sideways
    var covered = e.matches(".nc-scroll") && e.querySelector(FOCUSABLE);
    var need = e.getClientRects().length > 0 && scrolls(e) && (ours || !covered);
    if (need && !e.hasAttribute("tabindex")) {
      e.setAttribute("tabindex", "0");
      e.setAttribute("data-nc-scroll", "");
      if (!e.hasAttribute("role")) e.setAttribute("role", "region");
      if (!e.hasAttribute("aria-label")) e.setAttribute("aria-label", nameOf(e) + ", scrolls");
    } else if (!need && ours) {
      e.removeAttribute("tabindex");
      e.removeAttribute("data-nc-scroll");
    }
  }

  // A diagram wider than its box says so under it (its labels are never shrunk below 12 px to fit).
  function hint(e) {
    var note = e.querySelector(":scope > .nc-scroll-hint");
    if (note) note.hidden = !(e.getClientRects().length > 0 && e.scrollWidth > e.clientWidth + 1);
  }

  function reachAll() {
    all(document, BOXES).forEach(reach);
    all(document, ".nc-scroll").forEach(hint);
  }

  var queued = false;
  function soon() {
    if (queued) return;
    queued = true;
    requestAnimationFrame(function () {
      queued = false;
      reachAll();
    });
  }
  window.addEventListener("resize", soon);
  document.addEventListener("toggle", soon, true); // <details> opened: its tables can scroll now
  window.__nncanonReachAll = reachAll;

  // Material takes a code block's tabindex away on a screen without hover: give it back.
  new MutationObserver(function (records) {
    records.forEach(function (r) {
      var e = r.target;
      if (!e.hasAttribute("tabindex") && e.matches && e.matches(BOXES)) {
        e.removeAttribute("data-nc-scroll");
        reach(e);
      }
    });
  }).observe(document.documentElement, { subtree: true, attributes: true, attributeFilter: ["tabindex"] });

  // ---------------------------------------------------------------- folds

  // A link to a row inside a folded host opens the host (Chromium does so for a fragment navigation by
  // itself, not every browser does, and Material's instant navigation scrolls before it would), then
  // scrolls to the row, now that it has a place on the page.
  function reveal(id, scroll) {
    var target = id && document.getElementById(id);
    if (!target) return null;
    var opened = false;
    for (var d = target.closest("details:not([open])"); d; d = d.parentElement.closest("details:not([open])")) {
      d.open = true;
      opened = true;
    }
    if (opened && scroll !== false) target.scrollIntoView();
    return target;
  }
  window.__nncanonReveal = reveal;

  // A row just shown in an opened fold: scrolled into view again on the next frames while it is not in view
  // (a scroll made before a busy machine laid the fold out lands short), until it has stayed in view for SETTLE
  // frames in a row (a busy machine's late layout, a table wrapped or a note shown above it, can move it after
  // the first frame it was in view), for at most 600 frames (counted in frames, not seconds: a loaded machine
  // that lays the fold out late draws fewer frames too, where a one-second limit gave up before the layout
  // came), and never after the reader has scrolled on their own (a wheel, a touch or a key). While it keeps a
  // row, the row carries data-nc-keeping: the state a reader's script (or a test) can wait out.
  var SETTLE = 30;
  function keepInView(target) {
    var frames = 0;
    var stopped = false;
    var keeping = (parseInt(target.getAttribute("data-nc-keeping") || "0", 10) || 0) + 1;
    target.setAttribute("data-nc-keeping", String(keeping));
    function done() {
      var left = (parseInt(target.getAttribute("data-nc-keeping") || "1", 10) || 1) - 1;
      if (left > 0) target.setAttribute("data-nc-keeping", String(left));
      else target.removeAttribute("data-nc-keeping");
    }
    function stop() {
      stopped = true;
    }
    ["wheel", "touchstart", "keydown"].forEach(function (type) {
      window.addEventListener(type, stop, { once: true, passive: true });
    });
    ["pointerdown", "click"].forEach(function (type) {
      window.addEventListener(type, stop, { once: true, capture: true, passive: true });
    });
    var settled = 0;
    function check() {
      if (stopped || frames++ > 600) return done();
      var r = target.getBoundingClientRect();
      // once it has stayed in view, the job is done: a later scroll (the reader's or a script's) is not fought
      if (r.height && r.top >= 0 && (r.bottom <= window.innerHeight || r.height > window.innerHeight)) {
        if (++settled >= SETTLE) return done();
      } else {
        settled = 0;
        if (r.height) target.scrollIntoView();
      }
      requestAnimationFrame(check);
    }
    requestAnimationFrame(check);
  }
  window.__nncanonKeepInView = keepInView;

  // A link on the page to a row in a folded host opens the fold before the navigation scrolls, so the
  // browser's (or Material's, later) scroll lands on the row where it will be, not where it was hidden.
  document.addEventListener(
    "click",
    function (e) {
      var a = e.target.closest && e.target.closest('a[href^="#"]');
      if (a) reveal(decodeURIComponent(a.getAttribute("href").slice(1)), false);
    },
    true
  );

  // data-nc-hash on the root: the hash the page has handled (hashchange is queued, so it can come late)
  function fromHash() {
    var target = location.hash ? reveal(decodeURIComponent(location.hash.slice(1))) : null;
    if (target && target.closest("details.nc-fold")) keepInView(target);
    document.documentElement.setAttribute("data-nc-hash", location.hash);
  }
  window.addEventListener("hashchange", fromHash);

  function folds(button) {
    return all(document, "details." + button.getAttribute("data-fold"));
  }

  function syncFolds() {
    all(document, ".nc-fold-all").forEach(function (b) {
      var open = folds(b).every(function (d) {
        return d.open;
      });
      b.textContent = open ? "fold every host" : "open every host";
      b.setAttribute("aria-expanded", open ? "true" : "false");
      var wrap = b.closest(".nc-fold-all-wrap");
      if (wrap) wrap.hidden = false;
    });
  }
  document.addEventListener("toggle", function (e) {
    if (e.target.matches && e.target.matches("details.nc-fold")) syncFolds();
  }, true);
  document.addEventListener("click", function (e) {
    var b = e.target.closest && e.target.closest(".nc-fold-all");
    if (!b) return;
    var ds = folds(b);
    var open = !ds.every(function (d) {
      return d.open;
    });
    ds.forEach(function (d) {
      d.open = open;
    });
    syncFolds();
  });

  // ---------------------------------------------------------------- print

  var opened = [];
  window.addEventListener("beforeprint", function () {
    opened = all(document, "details:not([open])");
    opened.forEach(function (d) {
      d.open = true;
    });
  });
  window.addEventListener("afterprint", function () {
    opened.forEach(function (d) {
      d.open = false;
    });
    opened = [];
  });

  function init() {
    // the cheat sheet is open on a wide screen, one screen beside the diagram; on a phone it is several, so it
    // starts closed there (a tap opens it)
    if (window.matchMedia && window.matchMedia("(max-width: 44.9375em)").matches) {
      all(document, "details.nc-cheat[open]").forEach(function (d) {
        d.open = false;
      });
    }
    syncFolds();
    fromHash();
    soon();
    setTimeout(soon, 300); // after Material has wrapped the tables and measured its code blocks
  }

  window.nncanonPage.onEveryPage(init);
})();
