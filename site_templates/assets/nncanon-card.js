// nncanon encyclopedia: what a diagram part's card says, and where it sits (nncanon.js shows and hides it).
//
// fill() writes the card of a part from the page's embedded facts: its standard name, layout, shape
// measured on the tiny checkpoint, description, where it is read, its conditions, and links to its
// support row and printout line. Standard names may wrap before "." and "[" only, as in the tables.
(function () {
  "use strict";
  if (window.nncanonCard) return;

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

  // The card of part (whose diagram data is info) on page (nncanon.js's Page).
  function fill(page, card, part, info) {
    var v = info.value ? page.data.values[info.value] : null;
    card.textContent = "";
    card.classList.toggle("nc-card-pinned", part === page.pinned);
    card.setAttribute("data-path", info.path);

    var head = el("div", "nc-card-head");
    head.appendChild(el("strong", "nc-card-label", info.label));
    head.appendChild(ident("code", "nc-card-path", page.indexed(info, info.path)));
    if (info.count != null) head.appendChild(el("span", "nc-card-count", "× " + info.count));
    if (part === page.pinned) {
      var pin = el("span", "nc-card-pin", "pinned");
      pin.appendChild(el("span", "nc-card-esc", " · Esc unpins")); // hidden on a touch screen (nncanon.css)
      head.appendChild(pin);
      // a pinned card closes by its button too: the one way on a touch screen, where it is a bottom sheet
      var close = el("button", "nc-card-close", "×");
      close.type = "button";
      close.setAttribute("aria-label", "Unpin and close the card");
      head.appendChild(close);
    }
    card.appendChild(head);

    function row(key, build) {
      var d = el("div", "nc-card-row");
      d.appendChild(el("span", "nc-card-key", key));
      build(d);
      card.appendChild(d);
    }
    if (v) {
      var name = page.indexed(info, info.value);
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
        if (v.read_line) {
          // the source line the operation's name stands for, and where it is in transformers
          var line = el("code", "nc-card-line", v.read_line.code);
          line.title = v.read_line.file + ", line " + v.read_line.line;
          d.appendChild(el("br"));
          d.appendChild(line);
          d.appendChild(el("span", "nc-card-dims", " " + v.read_line.file + ":" + v.read_line.line));
        }
      });
      if (info.from) {
        // a chip's incoming arrows: the values a relation ties it to, or (dashed) the one produced before it
        row("arrows in", function (d) {
          info.from.forEach(function (f, i) {
            if (i) d.appendChild(document.createTextNode(", "));
            d.appendChild(ident("code", null, page.indexed(info, f[0])));
            if (f[1] === "order") d.appendChild(el("span", "nc-card-dims", " (the value before: no relation ties them)"));
          });
        });
      }
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
      if (info.count != null && info.kind == null && page.hasSlider() && info.section === "text") {
        card.appendChild(el("p", "nc-card-desc", info.count + " blocks; the slider below picks one."));
      } else if (info.count != null) {
        card.appendChild(el("p", "nc-card-desc", info.count + " blocks, each drawn below."));
      }
    }
    if (info.note) card.appendChild(el("p", "nc-card-note", info.note));
    links(page, card, info);

  }

  // Links from the card to the part's support row (its value's, else its host's first) and to its
  // first printout line; following one scrolls it into view (nncanon.js: the click handler).
  function links(page, card, info) {
    var rows = page.rows[info.value] || page.rows[info.rows[0]] || [];
    var row = rows[0];
    if (!row && !page.firstLine) return;
    var p = el("p", "nc-card-links");
    if (row && row.id) {
      var a = el("a", "nc-card-row-link", "support row ↓");
      a.href = "#" + row.id;
      p.appendChild(a);
    }
    if (page.firstLine) {
      if (p.firstChild) p.appendChild(document.createTextNode(" · "));
      var b = el("a", "nc-card-line-link", "printout line ↓");
      b.href = "#printout";
      p.appendChild(b);
    }
    card.appendChild(p);
  }

  // Where the card of part goes, in its section's box (.nc-view).
  function place(part, card, fresh) {
    var view = card.closest(".nc-view");
    if (!view || card.hidden) return;
    if (getComputedStyle(card).position === "fixed") return; // a bottom sheet (touch screens: nncanon.css)
    // under the part's figure and its identity line (never over the diagram), lined up with the part
    var box = view.getBoundingClientRect();
    var r = part.getBoundingClientRect();
    var inside = part.closest(".nc-interior-scroll");
    if (inside) {
      // a value chip of a block's inside (a tall column): beside the column at the chip's height where the
      // page has room (over the equations, not the diagram), else just under the chip
      var column = inside.querySelector("svg") || inside;
      var right = Math.min(column.getBoundingClientRect().right, inside.getBoundingClientRect().right) - box.left + 8;
      var beside = box.width - right >= card.offsetWidth;
      card.style.left = Math.round(beside ? right : Math.max(0, Math.min(r.left - box.left, box.width - card.offsetWidth))) + "px";
      card.style.top = Math.round((beside ? r.top : r.bottom + 4) - box.top) + "px";
      return;
    }
    // under the part's own drawing: a block figure also holds the block's inside and its equations, and a card
    // under all of that lands screens away from the part
    var figure = part.closest(".nc-figure");
    var under = figure && !figure.querySelector(".nc-inside") ? figure : part.closest(".nc-scroll") || figure || part;
    var next = under.nextElementSibling;
    if (next && next.classList.contains("nc-identity")) under = next;
    var top = Math.max(r.bottom, under.getBoundingClientRect().bottom);
    var width = card.offsetWidth, height = card.offsetHeight;
    var left = Math.max(0, Math.min(r.left - box.left, box.width - width));
    // the parts of the drawing the card's columns span: a card lying over the next part would catch the pointer
    // walking the block part by part (issue 52)
    var scroll = part.closest(".nc-scroll") || figure || part;
    var across = Array.prototype.filter.call(scroll.querySelectorAll(".nc-part"), function (p) {
      if (!p.getClientRects().length) return false;
      var q = p.getBoundingClientRect();
      return q.left < box.left + left + width && q.right > box.left + left;
    }).map(function (p) {
      return p.getBoundingClientRect();
    });
    // The side, chosen when the card is shown (fresh): re-placed on a scroll, a card that switched sides as the
    // window moved would jump away from the pointer reaching for its links. Under the figure where that starts in
    // the window; else above the part's row (over the parts before it, not the ones after) where that is in the
    // window; else just under the part and every part of its row the card spans.
    // the top of the part's row: the highest part the card spans that reaches down to the part's top
    var rowTop = across.reduce(function (t, q) {
      return q.top <= r.top && q.bottom >= r.top ? Math.min(t, q.top) : t;
    }, r.top);
    if (fresh || card.__ncSide === undefined) {
      card.__ncSide = top + Math.min(height, window.innerHeight / 2) <= window.innerHeight ? "figure"
        : rowTop - 8 - height >= 0 ? "above" : "part";
    }
    if (card.__ncSide === "above") {
      top = rowTop - 8 - height;
    } else if (card.__ncSide === "part") {
      top = across.reduce(function (t, q) {
        return q.top <= r.bottom && q.bottom > t ? q.bottom : t;
      }, r.bottom);
    }
    card.style.left = Math.round(left) + "px";
    card.style.top = Math.round(top - box.top + 4) + "px";
  }

  window.nncanonCard = { el: el, fill: fill, place: place };
})();
