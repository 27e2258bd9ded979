// Refreshes the page's panels every data-refresh seconds: fetches the
// same page and swaps its <main> in. The page reads the same without it.
(function () {
  "use strict";
  var main = document.getElementById("main");
  if (!main || !main.dataset.refresh || !window.fetch || !window.DOMParser) {
    return;
  }
  var every = Math.max(5, parseInt(main.dataset.refresh, 10) || 10) * 1000;
  function refresh() {
    // Not while the reader is typing in a form.
    if (document.activeElement && /^(INPUT|SELECT|TEXTAREA)$/.test(document.activeElement.tagName)) {
      return;
    }
    fetch(window.location.href, { credentials: "same-origin", headers: { "Accept": "text/html" } })
      .then(function (r) { return r.ok ? r.text() : null; })
      .then(function (html) {
        if (!html) { return; }
        var fresh = new DOMParser().parseFromString(html, "text/html").getElementById("main");
        if (fresh) { main.replaceChildren.apply(main, Array.prototype.slice.call(fresh.childNodes)); }
      })
      .catch(function () { /* the next round tries again */ });
  }
  window.setInterval(refresh, every);
})();
