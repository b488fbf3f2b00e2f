// ifsweep view: a filter takes effect as soon as it changes (the Apply button stays for the text box).
// No network, no storage: the page works the same from the server and from an exported file.
"use strict";
document.querySelectorAll("form.filters").forEach(function (form) {
  form.querySelectorAll("input[type=checkbox], select").forEach(function (input) {
    input.addEventListener("change", function () { form.submit(); });
  });
});
