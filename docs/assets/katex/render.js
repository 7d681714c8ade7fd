// The formulas typeset in the page, by KaTeX served with the site (no CDN): pymdownx.arithmatex (generic) leaves
// each $…$ as \(…\) and each $$…$$ as \[…\] inside an element of class "arithmatex".
document.addEventListener("DOMContentLoaded", function () {
  document.querySelectorAll(".arithmatex").forEach(function (element) {
    var tex = element.textContent.trim();
    var display = tex.startsWith("\\[");
    if (display || tex.startsWith("\\(")) {
      katex.render(tex.slice(2, -2), element, { displayMode: display, throwOnError: false });
    }
  });
});
