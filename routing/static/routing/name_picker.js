/*
 * The admin's name fields (routing/admin_pickers.py NameInput): a text input with a <datalist> of the names it may
 * take. When the operator leaves a field holding a name that is not on its list, a note under it says so and names
 * the closest ones, before the form is saved; the form's own check on save stays the one that refuses it.
 */
(function () {
  "use strict";

  /* Edit distance between two strings (insertions, deletions and substitutions cost one). */
  function distance(a, b) {
    let previous = Array.from({length: b.length + 1}, function (_, j) { return j; });
    for (let i = 1; i <= a.length; i++) {
      const current = [i];
      for (let j = 1; j <= b.length; j++) {
        current[j] = Math.min(previous[j] + 1, current[j - 1] + 1,
          previous[j - 1] + (a[i - 1] === b[j - 1] ? 0 : 1));
      }
      previous = current;
    }
    return previous[b.length];
  }

  /* Up to three names closest to `wanted` (case-folded), 60% alike or more, closest first. */
  function nearest(wanted, names) {
    const folded = wanted.toLowerCase();
    return names.map(function (name) {
      const longest = Math.max(folded.length, name.length) || 1;
      return {name: name, score: 1 - distance(folded, name.toLowerCase()) / longest};
    }).filter(function (c) { return c.score >= 0.6; })
      .sort(function (x, y) { return y.score - x.score; })
      .slice(0, 3).map(function (c) { return c.name; });
  }

  function namesOf(input) {
    const list = input.list;
    return list ? Array.from(list.options).map(function (o) { return o.value; }) : [];
  }

  function noteFor(input) {
    let note = input.parentNode.querySelector(".name-picker-note[data-for='" + input.name + "']");
    if (!note) {
      note = document.createElement("p");
      note.className = "name-picker-note help";
      note.style.color = "var(--error-fg)";
      note.dataset.for = input.name;
      note.setAttribute("role", "status");
      input.insertAdjacentElement("afterend", note);
    }
    return note;
  }

  function check(input) {
    const value = input.value.trim();
    const names = namesOf(input);
    const existing = input.parentNode.querySelector(".name-picker-note[data-for='" + input.name + "']");
    if (!value || names.indexOf(value) >= 0 || !names.length) {
      if (existing) {
        existing.remove();
      }
      return;
    }
    const close = nearest(value, names);
    noteFor(input).textContent = "\u201c" + value + "\u201d is not a configured name." +
      (close.length ? " Did you mean " + close.join(", ") + "?" : "");
  }

  function isPicker(node) {
    return node instanceof HTMLInputElement && node.classList.contains("name-picker-input");
  }

  document.addEventListener("change", function (event) {
    if (isPicker(event.target)) {
      check(event.target);
    }
  });
  document.addEventListener("input", function (event) {
    const note = isPicker(event.target) &&
      event.target.parentNode.querySelector(".name-picker-note[data-for='" + event.target.name + "']");
    if (note && namesOf(event.target).indexOf(event.target.value.trim()) >= 0) {
      note.remove();
    }
  });
  /* A row the admin's inline script adds is a copy of the empty row: point its inputs at their own list. */
  document.addEventListener("formset:added", function (event) {
    event.target.querySelectorAll("input.name-picker-input").forEach(function (input) {
      const list = input.parentNode.querySelector("datalist.name-picker");
      if (list) {
        list.id = input.id + "-names";
        input.setAttribute("list", list.id);
      }
    });
  });
}());
