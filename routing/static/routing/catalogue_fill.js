/*
 * The model form's price catalogue (routing/admin_catalogue.py): the upstream field offers the catalogued names of
 * the chosen provider's kind, and a catalogued name with the three prices still empty fills the prices, the limits
 * left empty and, when none is ticked, the capabilities, with a note naming the page and the day the figures were
 * read. The save does the same on the server, so a page without this script gets the same model.
 */
(function () {
  "use strict";

  const PRICES = ["input_price", "output_price", "cached_input_price"];
  const LIMITS = ["context_window", "max_output_tokens"];

  function field(name) {
    return document.getElementById("id_" + name);
  }

  function setUp() {
    const upstream = field("upstream");
    const provider = field("provider");
    const holder = document.getElementById("catalogue-data");
    if (!upstream || !provider || !holder) {
      return;
    }
    const data = JSON.parse(holder.textContent);
    const list = document.getElementById(upstream.getAttribute("list"));

    function kind() {
      return data.providers[provider.value] || "";
    }

    function offerNames() {
      const names = Object.keys(data.entries[kind()] || {}).sort();
      list.replaceChildren.apply(list, names.map(function (name) {
        const option = document.createElement("option");
        option.value = name;
        return option;
      }));
    }

    function note() {
      let shown = document.getElementById("catalogue-note");
      if (!shown) {
        shown = document.createElement("p");
        shown.id = "catalogue-note";
        shown.className = "help";
        shown.setAttribute("role", "status");
        upstream.parentNode.appendChild(shown);
      }
      return shown;
    }

    function capabilityBoxes() {
      return Array.from(document.querySelectorAll("input[name='capabilities']"));
    }

    // What this script last wrote, by field name: a field still holding it is the script's to replace as the
    // name is typed on (gpt-4o, then gpt-4o-mini); a field the operator edited is theirs and stays.
    let written = {};

    function ours(input, name) {
      return input.value.trim() === "" || (name in written && input.value === written[name]);
    }

    function write(name, value) {
      const input = field(name);
      if (input && ours(input, name)) {
        input.value = value === null ? "" : value;
        written[name] = input.value;
      }
    }

    function fill() {
      const entry = (data.entries[kind()] || {})[upstream.value.trim()];
      const prices = PRICES.map(function (name) { return [name, field(name)]; }).filter(function (pair) {
        return pair[1];
      });
      if (!prices.every(function (pair) { return ours(pair[1], pair[0]); })) {
        return;  // a price the operator typed: the figures are theirs
      }
      const boxes = capabilityBoxes();
      const ticked = boxes.filter(function (box) { return box.checked; }).map(function (box) { return box.value; });
      const boxesOurs = !ticked.length || ("capabilities" in written && ticked.join() === written.capabilities);
      if (!entry) {
        if (Object.keys(written).length) {  // the name moved off a catalogued one: take back what was written
          PRICES.concat(LIMITS).forEach(function (name) { write(name, null); });
          if (boxesOurs) {
            boxes.forEach(function (box) { box.checked = false; });
          }
          written = {};
          note().textContent = "";
        }
        return;
      }
      PRICES.concat(LIMITS).forEach(function (name) { write(name, entry[name]); });
      if (boxesOurs) {
        boxes.forEach(function (box) { box.checked = entry.capabilities.indexOf(box.value) >= 0; });
        written.capabilities = boxes.filter(function (box) { return box.checked; }).map(function (box) {
          return box.value;
        }).join();
      }
      note().textContent = "Filled from the price catalogue: read " + entry.as_of + " from " + entry.source +
        (entry.note ? " (" + entry.note + ")" : "") + ".";
    }

    offerNames();
    provider.addEventListener("change", function () { offerNames(); fill(); });
    upstream.addEventListener("input", fill);
    upstream.addEventListener("change", fill);
  }

  if (document.readyState === "loading") {
    document.addEventListener("DOMContentLoaded", setUp);
  } else {
    setUp();
  }
})();
