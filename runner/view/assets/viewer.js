// ifsweep view: a filter takes effect as soon as it changes (the Apply button stays for the text box).
// No network, no storage: the page works the same from the server and from an exported file.
"use strict";
document.querySelectorAll("form.filters").forEach(function (form) {
  form.querySelectorAll("input[type=checkbox], select").forEach(function (input) {
    input.addEventListener("change", function () { form.submit(); });
  });
});
// On an instance page opened from a list: the arrow keys walk that list (outside text fields).
document.addEventListener("keydown", function (event) {
  var tag = (event.target && event.target.tagName) || "";
  if (tag === "INPUT" || tag === "SELECT" || tag === "TEXTAREA" || event.altKey || event.ctrlKey || event.metaKey) {
    return;
  }
  var rel = event.key === "ArrowLeft" ? "prev" : event.key === "ArrowRight" ? "next" : "";
  var to = rel && document.querySelector("nav.walk a[rel=" + rel + "]");
  if (to) { window.location.href = to.getAttribute("href"); }
});
// A table of class "sortable" (the overview's boards) sorts on a click of its header, as the HTML
// report's do: figures as numbers ("$0.0123", "81.2%", "12"), other cells as text; "–" last. A second
// click reverses the order.
function sortKey(cell) {
  var text = (cell.textContent || "").trim();
  var num = parseFloat(text.replace(/[$,%]/g, ""));
  return { missing: text === "" || text === "–" || text === "-", num: num, text: text };
}
function compareKeys(a, b) {
  if (a.missing !== b.missing) { return a.missing ? 1 : -1; }
  if (!isNaN(a.num) && !isNaN(b.num)) { return a.num - b.num; }
  return a.text.localeCompare(b.text, undefined, { numeric: true });
}
document.querySelectorAll("table.sortable").forEach(function (tbl) {
  tbl.querySelectorAll("thead th").forEach(function (th, col) {
    th.classList.add("sort-head");
    th.setAttribute("title", "sort by this column");
    th.addEventListener("click", function () {
      var down = th.getAttribute("aria-sort") === "ascending";
      tbl.querySelectorAll("thead th").forEach(function (h) { h.removeAttribute("aria-sort"); });
      th.setAttribute("aria-sort", down ? "descending" : "ascending");
      var body = tbl.tBodies[0];
      var rows = Array.prototype.slice.call(body.rows);
      rows.sort(function (r1, r2) {
        var a = sortKey(r1.cells[col]), b = sortKey(r2.cells[col]);
        var c = compareKeys(a, b);
        return a.missing || b.missing ? c : down ? -c : c;
      });
      rows.forEach(function (r) { body.appendChild(r); });
    });
  });
});
// A link to a folded judge call or constraint (a constraint's "call ›", a call's "#3") opens what
// folds it, then brings it into view.
function openTarget() {
  var id = decodeURIComponent((window.location.hash || "").slice(1));
  var el = id && document.getElementById(id);
  if (!el || (el.tagName === "SECTION" && el.classList.contains("export-instance"))) { return; }
  for (var p = el; p; p = p.parentElement) {
    if (p.tagName === "DETAILS") { p.open = true; }
  }
  el.scrollIntoView({ block: "start" });
}
// An export (`ifsweep view --export`) holds each pair as a page of shared pieces: one page is shown at
// a time, built when first shown; the overview and the lists are the rest of the file.
function piecesOf(id) {
  var el = document.getElementById(id);
  return el ? JSON.parse(el.textContent) : null;
}
function joined(data, k) {  // pieces.py: numbers in base 36, "a-b" for the run a, a+1, ..., b
  var out = [];
  data.pages[k].split(",").forEach(function (x) {
    var dash = x.indexOf("-");
    var first = parseInt(dash < 0 ? x : x.slice(0, dash), 36), last = dash < 0 ? first : parseInt(x.slice(dash + 1), 36);
    for (var n = first; n <= last; n++) { out.push(data.pieces[n]); }
  });
  return out.join("");
}
var exported = piecesOf("ifsweep-pages");
function showPage() {
  if (!exported) { return; }
  var id = decodeURIComponent((window.location.hash || "").slice(1));
  var el = id ? document.getElementById(id) : null;
  var section = el && el.closest ? el.closest("section.export-instance") : null;
  document.querySelectorAll("section.export-instance").forEach(function (s) {
    if (s !== section) { s.hidden = true; }
  });
  document.querySelectorAll("main > section:not(.export-instance)").forEach(function (s) {
    s.hidden = section !== null;
  });
  if (section) {
    if (!section.firstChild) {
      section.innerHTML = joined(exported, Number(section.getAttribute("data-page")));
    }
    section.hidden = false;
  }
  if (!section || el === section) { window.scrollTo(0, 0); }
}
function navigate() { showPage(); openTarget(); }
window.addEventListener("hashchange", navigate);
navigate();
// A served instance page keeps each judge call's sent messages out of its HTML (shared pieces, once):
// a call's messages are built when it is opened.
var sent = piecesOf("ifsweep-sent");
document.addEventListener("toggle", function (event) {
  var d = event.target;
  if (sent && d.open && d.hasAttribute && d.hasAttribute("data-sent") && !d.hasAttribute("data-built")) {
    d.setAttribute("data-built", "");
    d.insertAdjacentHTML("beforeend", joined(sent, Number(d.getAttribute("data-sent"))));
  }
}, true);
