// nncanon encyclopedia: the family page's interactive diagrams.
//
// The page (generator/render.py, site_templates/family.md.j2) draws every diagram as inline SVG;
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
// - links the views: a part lights its rows and printout lines, a row or line lights its parts.
//
// Material's navigation.instant swaps pages without reloading this script, so everything per page
// runs from document$ (it emits on every page), and the listeners are delegated from document
// once: initializing a page again only rebuilds its state. window.__nncanonReady is the
// performance.now() at which the page's diagrams became interactive, window.__nncanonInitMs what
// the init took (bench/bench_page.py).
(function () {
  "use strict";
  if (window.__nncanonLoaded) return;
  window.__nncanonLoaded = true;

  var page = null; // the current page's state, or null on a page without diagrams
  var URL_DELAY = 120; // ms: the URL follows the slider without flooding history.replaceState

  function all(root, sel) {
    return Array.prototype.slice.call(root.querySelectorAll(sel));
  }

  function el(tag, cls, text) {
    var e = document.createElement(tag);
    if (cls) e.className = cls;
    if (text != null) e.textContent = text;
    return e;
  }

  // A standard name that may wrap before each "." and "[" and nowhere else (as the page's tables do).
  function ident(tag, cls, name) {
    var e = el(tag, cls);
    String(name).split(/(?=[.[])/).forEach(function (piece, i) {
      if (i) e.appendChild(document.createElement("wbr"));
      e.appendChild(document.createTextNode(piece));
    });
    return e;
  }

  // ---------------------------------------------------------------- the page's state

  function Page(dataEl) {
    var self = this;
    this.data = JSON.parse(dataEl.getAttribute("data-json"));
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
  Page.prototype.visible = function (part) {
    var panel = part.closest(".nc-blocks > .nc-block-figure");
    return !panel || panel.classList.contains("nc-current");
  };

  Page.prototype.findPart = function (path) {
    var found = null;
    this.parts.forEach(function (p) {
      if (!found && p.getAttribute("data-path") === path && page.visible(p)) found = p;
    });
    return found;
  };

  // A path as the picked block reads it: layers[i] -> layers[7] (text block parts only).
  Page.prototype.indexed = function (info, path) {
    if (!info || !info.kind || !this.hasSlider()) return path;
    return path.replace("layers[i]", "layers[" + this.block + "]");
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
    this.slider.setAttribute("aria-valuetext", "layers[" + i + "], " + k.label + " (" + kind + ")");
    var out = document.querySelector(".nc-pick-i");
    if (out) out.textContent = "i = " + i;
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
        t.textContent = on ? tpl.replace("layers[i]", "layers[" + i + "]") : tpl; // others print as layers[i]
      });
    });
    // a pinned block part follows to the new kind's diagram, or unpins if that kind has none
    if (this.pinned && !this.visible(this.pinned)) {
      this.pin(this.findPart(this.pinned.getAttribute("data-path")), true);
    }
    if (this.hover && !this.visible(this.hover)) this.hover = null;
    if (this.focus && !this.visible(this.focus)) this.focus = null;
    this.update();
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
    var v = info.value ? this.data.values[info.value] : null;
    card.textContent = "";
    card.classList.toggle("nc-card-pinned", part === this.pinned);
    card.setAttribute("data-path", info.path);

    var head = el("div", "nc-card-head");
    head.appendChild(el("strong", "nc-card-label", info.label));
    head.appendChild(ident("code", "nc-card-path", this.indexed(info, info.path)));
    if (info.count != null) head.appendChild(el("span", "nc-card-count", "× " + info.count));
    if (part === this.pinned) {
      var pin = el("span", "nc-card-pin", "pinned");
      pin.appendChild(el("span", "nc-card-esc", " · Esc unpins")); // hidden on a touch screen (nncanon.css)
      head.appendChild(pin);
    }
    card.appendChild(head);

    function row(key, build) {
      var d = el("div", "nc-card-row");
      d.appendChild(el("span", "nc-card-key", key));
      build(d);
      card.appendChild(d);
    }
    if (v) {
      var name = this.indexed(info, info.value);
      row("standard name", function (d) {
        d.appendChild(ident("code", "nc-card-name", name));
        if (!v.writable) d.appendChild(el("span", "nc-badge", "read-only"));
      });
      row("layout", function (d) {
        d.appendChild(el("code", "nc-card-layout", v.layout));
        if (v.dims.length) d.appendChild(el("span", "nc-card-dims", " [" + v.dims.join(" ") + "]"));
      });
      if (v.measured) {
        row("measured", function (d) {
          d.appendChild(el("span", "nc-card-measured", v.measured));
        });
      }
      card.appendChild(el("p", "nc-card-desc", v.description));
      row("read at", function (d) {
        d.appendChild(el("span", "nc-card-read", v.read_at));
      });
      v.conditions.forEach(function (c) {
        var p = el("p", "nc-card-cond");
        p.appendChild(document.createTextNode("⚠︎ needs "));
        p.appendChild(el("code", null, c.needs));
        if (c.why) p.appendChild(document.createTextNode(": " + c.why));
        card.appendChild(p);
      });
    } else {
      if (info.module) {
        var mod = info.module.replace(/^model\./, "");
        row("module", function (d) {
          d.appendChild(ident("code", "nc-card-name", mod));
        });
      }
      if (info.count != null && info.kind == null && this.hasSlider() && info.section === "text") {
        card.appendChild(el("p", "nc-card-desc", info.count + " blocks; the slider below picks one."));
      } else if (info.count != null) {
        card.appendChild(el("p", "nc-card-desc", info.count + " blocks, each drawn below."));
      }
    }
    if (info.note) card.appendChild(el("p", "nc-card-note", info.note));
    this.cardLinks(card, info);

    card.hidden = false;
    part.setAttribute("aria-describedby", card.id);
    this.placeCard(part, card);
  };

  // Links from the card to the part's support row (its value's, else its host's first) and to its
  // first printout line; following one scrolls it into view (nncanon.js: the click handler).
  Page.prototype.cardLinks = function (card, info) {
    var rows = this.rows[info.value] || this.rows[info.rows[0]] || [];
    var row = rows[0];
    if (!row && !this.firstLine) return;
    var p = el("p", "nc-card-links");
    if (row && row.id) {
      var a = el("a", "nc-card-row-link", "support row ↓");
      a.href = "#" + row.id;
      p.appendChild(a);
    }
    if (this.firstLine) {
      if (p.firstChild) p.appendChild(document.createTextNode(" · "));
      var b = el("a", "nc-card-line-link", "printout line ↓");
      b.href = "#printout";
      p.appendChild(b);
    }
    card.appendChild(p);
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

  Page.prototype.placeCard = function (part, card) {
    var view = card.closest(".nc-view");
    if (!view || card.hidden) return;
    // under the part's figure and its identity line (never over the diagram), lined up with the part
    var box = view.getBoundingClientRect();
    var r = part.getBoundingClientRect();
    var under = part.closest(".nc-figure") || part.closest(".nc-scroll") || part;
    var next = under.nextElementSibling;
    if (next && next.classList.contains("nc-identity")) under = next;
    var bottom = under.getBoundingClientRect().bottom;
    var width = card.offsetWidth;
    var left = Math.max(0, Math.min(r.left - box.left, box.width - width));
    card.style.left = Math.round(left) + "px";
    card.style.top = Math.round(Math.max(r.bottom, bottom) - box.top + 4) + "px";
  };

  Page.prototype.replace = function () {
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
      if (page !== self) return;
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

  // ---------------------------------------------------------------- events (delegated, once)

  function partOf(target) {
    return target && target.closest ? target.closest(".nc-part") : null;
  }

  document.addEventListener("mouseover", function (e) {
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
    if (!page) return;
    var part = partOf(e.target);
    if (part && page.focus !== part) {
      page.focus = part;
      page.dismissed = false;
      page.update();
    }
  });

  document.addEventListener("focusout", function (e) {
    if (!page) return;
    var part = partOf(e.target);
    if (part && part === page.focus) {
      page.focus = null;
      page.update();
    }
  });

  document.addEventListener("click", function (e) {
    if (!page) return;
    var part = partOf(e.target);
    var link = e.target.closest && e.target.closest(".nc-card-line-link");
    if (link && page.showLine()) {
      e.preventDefault();
      return;
    }
    if (part) {
      page.pin(page.pinned === part ? null : part);
    } else if (page.pinned && !(e.target.closest && e.target.closest(".nc-card, .nc-picker"))) {
      page.pin(null);
    }
  });

  document.addEventListener("keydown", function (e) {
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
    if (page && e.target.classList && e.target.classList.contains("nc-slider")) {
      page.setBlock(parseInt(e.target.value, 10));
    }
  });

  var queued = false;
  function replaceSoon() {
    if (queued || !page) return;
    queued = true;
    requestAnimationFrame(function () {
      queued = false;
      if (page) page.replace();
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
    if (page) clearTimeout(page.urlTimer);
    page = null;
    if (dataEl) {
      try {
        page = new Page(dataEl);
        page.loadUrl();
        document.documentElement.classList.add("nc-ready");
      } catch (err) {
        page = null;
        console.error("nncanon: the diagrams could not start:", err); // eslint-disable-line no-console
      }
    }
    window.__nncanonReady = performance.now();
    window.__nncanonInitMs = window.__nncanonReady - start;
  }

  if (typeof document$ !== "undefined" && document$.subscribe) {
    document$.subscribe(init);
  } else if (document.readyState === "loading") {
    document.addEventListener("DOMContentLoaded", init);
  } else {
    init();
  }
})();
