// nncanon encyclopedia: the family page's interactive diagrams.
//
// The page (generator/site/render.py, site_templates/family.md.j2) draws every diagram as inline SVG;
// each part is a focusable button whose data-path is its standard path, and #nc-data holds, as
// JSON in an attribute, what the parts' cards say and which support-table rows and printout lines
// each part names. This script:
//
// - shows a part's card on hover and on keyboard focus, pins it on click / Enter / Space, and
//   unpins it on Escape (or a click elsewhere);
// - lets the block slider (mouse, arrow keys) pick a block: the block diagram redraws for that
//   block's kind, and the identity line and card follow;
// - keeps the picked block and the pinned part in the URL (?block=7&part=layers[i].mlp.router), so
//   a link opens the page in that state;
// - links the views: a part lights its rows and printout lines (a value chip also its dataflow arcs and the
//   chips at their other ends), a row or line lights its parts.
//
// This file is the page's state and what it draws; assets/nncanon-events.js (loaded after it) listens
// and starts a page's state on every page Material's instant navigation shows.
(function () {
  "use strict";
  if (window.__nncanonLoaded) return;
  window.__nncanonLoaded = true;

  // the current page's state (null on a page without diagrams), shared with assets/nncanon-events.js
  var shared = (window.nncanonPage = { current: null });

  // the per-page start of every script that runs per page (nncanon-events.js, nncanon-page.js): Material's instant
  // navigation emits each page it shows on document$; without it (no site_url) a page loads whole, once
  shared.onEveryPage = function (init) {
    if (typeof document$ !== "undefined" && document$.subscribe) {
      document$.subscribe(init);
    } else if (document.readyState === "loading") {
      document.addEventListener("DOMContentLoaded", init);
    } else {
      init();
    }
  };
  var URL_DELAY = 120; // ms: the URL follows the slider without flooding history.replaceState

  function all(root, sel) {
    return Array.prototype.slice.call(root.querySelectorAll(sel));
  }

  var card$ = window.nncanonCard; // assets/nncanon-card.js, loaded first: what a card says
  var el = card$.el;

  // ---------------------------------------------------------------- the page's state

  function Page(data) {
    var self = this;
    this.data = data;
    all(document, ".nc-part").forEach(function (part) {
      var info = self.data.parts[part.id];
      if (info && info.aria) part.setAttribute("aria-label", info.aria);
    });
    this.blocks = this.data.blocks || [];
    this.kinds = {};
    (this.data.kinds || []).forEach(function (k) {
      self.kinds[k.kind] = k;
    });
    this.block = 0;
    this.hover = null; // the part under the mouse
    this.focus = null; // the part with keyboard focus
    this.pinned = null; // the pinned part
    this.dismissed = false; // Escape hid the card until the next hover or focus
    this.lit = [];
    this.slider = document.querySelector(".nc-slider");
    this.panels = all(document, ".nc-blocks > .nc-block-figure");
    this.parts = all(document, ".nc-part");
    this.rows = {};
    all(document, ".nc-host tr[data-path]").forEach(function (tr) {
      (self.rows[tr.getAttribute("data-path")] = self.rows[tr.getAttribute("data-path")] || []).push(tr);
    });
    this.lines = {};
    this.lineBlocks = new Map();
    this.indexLines();
    this.urlTimer = 0;
  }

  // Each printout line's path, and the blocks its ModuleList entry covers ("(4-6): 3 x ..." and
  // every line nested under it), so a part lights only the lines of the block picked.
  Page.prototype.indexLines = function () {
    var self = this;
    var stack = [];
    all(document, "pre.nc-printout .line").forEach(function (line) {
      var text = line.textContent;
      var indent = text.length - text.replace(/^ +/, "").length;
      while (stack.length && stack[stack.length - 1].indent >= indent) stack.pop();
      var range = stack.length ? stack[stack.length - 1].range : null;
      var own = line.getAttribute("data-layers");
      if (own) {
        var m = own.split("-");
        range = [parseInt(m[0], 10), parseInt(m[m.length - 1], 10)];
        stack.push({ indent: indent, range: range });
      } else if (/\(\s*$/.test(text)) {
        stack.push({ indent: indent, range: range });
      }
      var path = line.getAttribute("data-path");
      if (!path) return;
      (self.lines[path] = self.lines[path] || []).push(line);
      if (range) self.lineBlocks.set(line, range);
    });
  };

  Page.prototype.info = function (part) {
    return this.data.parts[part.id] || null;
  };

  Page.prototype.hasSlider = function () {
    return !!this.slider && this.blocks.length > 0;
  };

  Page.prototype.kindOf = function (i) {
    return this.blocks[i];
  };

  // The parts drawn now: the chains, the vision block and the picked block's kind.
  // A block is drawn twice, wide and narrow, and the page's width shows one (nncanon.css): a part of the other is
  // not drawn now.
  Page.prototype.visible = function (part) {
    var panel = part.closest(".nc-blocks > .nc-block-figure");
    if (panel && !panel.classList.contains("nc-current")) return false;
    var drawing = part.closest(".nc-wide, .nc-narrow");
    return !drawing || drawing.getClientRects().length > 0;
  };

  Page.prototype.findPart = function (path) {
    var self = this;
    var found = null;
    this.parts.forEach(function (p) {
      if (!found && p.getAttribute("data-path") === path && self.visible(p)) found = p;
    });
    return found;
  };

  // The picked block's index in its own stack: an encoder-decoder's slider runs over both stacks (the data's
  // "local" gives each block's index within its stack: the decoder's first block is decoder.layers[0]).
  Page.prototype.local = function (i) {
    return this.data.local ? this.data.local[i] : i;
  };

  // A path as the picked block reads it: layers[i] -> layers[7] (text block parts only).
  Page.prototype.indexed = function (info, path) {
    if (!info || !info.kind || !this.hasSlider()) return path;
    return path.replace("layers[i]", "layers[" + this.local(this.block) + "]");
  };

  // ---------------------------------------------------------------- the block slider

  Page.prototype.setBlock = function (i, keepUrl) {
    if (!this.hasSlider()) return;
    var n = this.blocks.length;
    i = Math.max(0, Math.min(n - 1, isNaN(i) ? 0 : i));
    this.block = i;
    var kind = this.kindOf(i);
    var k = this.kinds[kind] || { label: kind, n: 0 };
    if (String(this.slider.value) !== String(i)) this.slider.value = String(i);
    var at = this.local(i);
    this.slider.setAttribute("aria-valuetext", "layers[" + at + "], " + k.label + " (" + kind + ")");
    var out = document.querySelector(".nc-pick-i");
    if (out) out.textContent = "i = " + at;
    var label = document.querySelector(".nc-pick-kind");
    if (label) {
      label.textContent = "";
      label.appendChild(el("span", "nc-swatch nc-kind-" + k.n));
      label.appendChild(el("strong", null, k.label));
      label.appendChild(document.createTextNode(" · "));
      label.appendChild(el("code", null, kind));
    }
    all(document, ".nc-tick.nc-picked").forEach(function (t) {
      t.classList.remove("nc-picked");
    });
    var tick = document.querySelector('.nc-tick[data-block="' + i + '"]');
    if (tick) tick.classList.add("nc-picked");
    this.panels.forEach(function (p) {
      var on = p.getAttribute("data-kind") === kind;
      p.classList.toggle("nc-current", on);
      all(p, ".nc-indexed").forEach(function (t) {
        var tpl = t.getAttribute("data-path") || t.textContent;
        t.textContent = on ? tpl.replace("layers[i]", "layers[" + at + "]") : tpl; // others print as layers[i]
      });
    });
    // a pinned block part follows to the new kind's diagram, or unpins if that kind has none
    if (this.pinned && !this.visible(this.pinned)) {
      this.pin(this.findPart(this.pinned.getAttribute("data-path")), true);
    }
    if (this.hover && !this.visible(this.hover)) this.hover = null;
    if (this.focus && !this.visible(this.focus)) this.focus = null;
    this.update();
    if (window.__nncanonReachAll) window.__nncanonReachAll(); // the shown figure's boxes may scroll, or not
    if (!keepUrl) this.saveUrl();
  };

  // ---------------------------------------------------------------- pinning and the card

  Page.prototype.pin = function (part, quiet) {
    if (this.pinned) this.pinned.setAttribute("aria-pressed", "false");
    this.pinned = part || null;
    if (this.pinned) this.pinned.setAttribute("aria-pressed", "true");
    this.dismissed = false;
    if (!quiet) {
      this.update();
      this.saveUrl();
    }
  };

  Page.prototype.active = function () {
    if (this.dismissed) return null;
    return this.hover || this.focus || this.pinned;
  };

  Page.prototype.update = function () {
    var self = this;
    this.lit.forEach(function (e) {
      e.classList.remove("nc-lit", "nc-lit-main", "nc-active");
    });
    this.lit = [];
    this.firstLine = null;
    this.parts.forEach(function (p) {
      p.classList.toggle("nc-pinned", p === self.pinned);
    });
    var part = this.active();
    all(document, ".nc-card").forEach(function (card) {
      if (!part || !card.closest(".nc-view").contains(part)) self.hideCard(card);
    });
    if (!part) return;
    var info = this.info(part);
    part.classList.add("nc-active");
    this.lit.push(part);
    this.lightEdges(part);
    if (!info) return;
    info.rows.forEach(function (r, n) {
      (self.rows[r] || []).forEach(function (tr) {
        tr.classList.add("nc-lit");
        if (n === 0 && r === info.value) tr.classList.add("nc-lit-main");
        self.lit.push(tr);
      });
    });
    var first = null;
    this.firstLine = null;
    info.lines.forEach(function (path) {
      (self.lines[path] || []).forEach(function (line) {
        var range = self.lineBlocks.get(line);
        if (info.kind && range && self.hasSlider() && (self.block < range[0] || self.block > range[1])) return;
        line.classList.add("nc-lit");
        self.lit.push(line);
        if (!first) first = line;
      });
    });
    this.firstLine = first;
    if (first) {
      // scroll the printout's own box (never the page) to the part's first line
      var box = first.closest("code");
      if (box && box.scrollHeight > box.clientHeight) {
        var top = first.offsetTop - box.offsetTop;
        if (top < box.scrollTop || top > box.scrollTop + box.clientHeight - 20) {
          box.scrollTop = Math.max(0, top - box.clientHeight / 3);
        }
      }
    }
    this.showCard(part, info);
  };

  // A chip's dataflow arcs, and the chips at their other ends.
  Page.prototype.lightEdges = function (part) {
    var self = this;
    var id = CSS.escape(part.id);
    all(document, '.nc-edge[data-from="' + id + '"], .nc-edge[data-to="' + id + '"]').forEach(function (e) {
      var other = document.getElementById(e.getAttribute(e.getAttribute("data-from") === part.id ? "data-to" : "data-from"));
      [e, other].forEach(function (x) {
        if (x) {
          x.classList.add("nc-lit");
          self.lit.push(x);
        }
      });
    });
  };

  Page.prototype.hideCard = function (card) {
    if (!card.hidden) card.hidden = true;
    this.parts.forEach(function (p) {
      if (p.getAttribute("aria-describedby") === card.id) p.removeAttribute("aria-describedby");
    });
  };

  Page.prototype.cardFor = function (part) {
    var view = part.closest(".nc-view");
    return view ? view.querySelector(".nc-card") : null;
  };

  Page.prototype.showCard = function (part, info) {
    var card = this.cardFor(part);
    if (!card) return;
    // the same card (part, pin, block) is kept, not rebuilt: a link in it being clicked or focused
    // moves the focus off the part, and a rebuilt card would lose that link mid-click
    var key = part.id + "|" + (part === this.pinned) + "|" + this.block;
    if (!card.hidden && card.getAttribute("data-key") === key) {
      part.setAttribute("aria-describedby", card.id);
      this.placeCard(part, card);
      return;
    }
    card.setAttribute("data-key", key);
    card$.fill(this, card, part, info);

    card.hidden = false;
    part.setAttribute("aria-describedby", card.id);
    this.placeCard(part, card, true); // a card newly shown: placed afresh
  };

  // Scroll the part's first printout line into view: its own box to the line, and the page to the box.
  Page.prototype.showLine = function () {
    var line = this.firstLine;
    if (!line) return false;
    line.scrollIntoView({ block: "center" });
    line.classList.add("nc-target");
    setTimeout(function () {
      line.classList.remove("nc-target");
    }, 2000);
    return true;
  };

  Page.prototype.placeCard = function (part, card, fresh) {
    card$.place(part, card, fresh);
  };

  Page.prototype.replace = function () {
    // the window crossed the width where the other drawing of a block shows: the same parts, in that drawing
    var self = this;
    var moved = false;
    ["pinned", "hover", "focus"].forEach(function (key) {
      if (self[key] && !self.visible(self[key])) {
        var twin = self.findPart(self[key].getAttribute("data-path"));
        if (key === "pinned") self.pin(twin, true);
        else self[key] = null;
        moved = true;
      }
    });
    if (moved) this.update();
    var part = this.active();
    if (part) {
      var card = this.cardFor(part);
      if (card) this.placeCard(part, card);
    }
  };

  // ---------------------------------------------------------------- linked views, reversed

  // Light the drawn parts a support row or printout line names: the parts whose value it is,
  // else the parts whose module is it or whose host holds it.
  Page.prototype.lightParts = function (path) {
    var self = this;
    this.clearReverse();
    var strong = [];
    var weak = [];
    this.parts.forEach(function (p) {
      if (!self.visible(p)) return;
      var info = self.info(p);
      if (!info) return;
      if (info.value === path || info.module === path) strong.push(p);
      else if (info.rows.indexOf(path) >= 0) weak.push(p);
    });
    this.reverse = strong.length ? strong : weak;
    this.reverse.forEach(function (p) {
      p.classList.add("nc-linked");
    });
  };

  Page.prototype.clearReverse = function () {
    (this.reverse || []).forEach(function (p) {
      p.classList.remove("nc-linked");
    });
    this.reverse = [];
  };

  // ---------------------------------------------------------------- the URL

  function query(block, part) {
    var params = new URLSearchParams(location.search);
    params.delete("block");
    params.delete("part");
    var q = [];
    params.forEach(function (v, k) {
      q.push(encodeURIComponent(k) + "=" + encodeURIComponent(v));
    });
    if (block) q.push("block=" + block);
    if (part) q.push("part=" + encodeURIComponent(part).replace(/%5B/gi, "[").replace(/%5D/gi, "]"));
    return q.length ? "?" + q.join("&") : "";
  }

  Page.prototype.saveUrl = function () {
    var self = this;
    clearTimeout(this.urlTimer);
    this.urlTimer = setTimeout(function () {
      if (shared.current !== self) return;
      var part = self.pinned ? self.pinned.getAttribute("data-path") : null;
      var url = location.pathname + query(self.hasSlider() ? self.block : 0, part) + location.hash;
      if (url !== location.pathname + location.search + location.hash) {
        history.replaceState(history.state, "", url);
      }
    }, URL_DELAY);
  };

  Page.prototype.loadUrl = function () {
    var params = new URLSearchParams(location.search);
    var block = parseInt(params.get("block"), 10);
    var path = params.get("part");
    var hashPart = null;
    var hash = decodeURIComponent(location.hash.slice(1));
    if (hash) {
      var t = document.getElementById(hash);
      if (t && t.classList.contains("nc-part")) hashPart = t;
    }
    if (isNaN(block) && hashPart && hashPart.closest(".nc-blocks")) {
      block = this.blocks.indexOf(hashPart.closest(".nc-block-figure").getAttribute("data-kind"));
    }
    this.setBlock(isNaN(block) ? 0 : block, true);
    var part = path ? this.findPart(path) : hashPart && this.visible(hashPart) ? hashPart : null;
    this.pin(part, true);
    this.update();
    // the state as drawn: a block out of range is clamped, a part the picked block lacks is dropped
    this.saveUrl();
    // a linked part is shown (unless the URL names another target), and its printout line in its box
    if (part && !hash) part.scrollIntoView({ block: "center" });
  };

  shared.Page = Page;
  shared.all = all;
})();
