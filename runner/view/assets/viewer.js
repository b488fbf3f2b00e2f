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
