// Live tables: a table with data-live="<url>" has its <tbody> replaced by that
// URL's HTML fragment every few seconds while the page is visible.
(function () {
  var table = document.querySelector("table[data-live]");
  if (!table) return;
  var body = table.querySelector("tbody");
  function refresh() {
    if (document.hidden) return;
    fetch(table.getAttribute("data-live"), {credentials: "same-origin"})
      .then(function (r) { return r.ok ? r.text() : null; })
      .then(function (html) { if (html !== null) { body.innerHTML = html; document.body.dataset.refreshed = Date.now(); } })
      .catch(function () {});
  }
  setInterval(refresh, 3000);
})();

// Live sections: an element with data-live-section="<url>" has its content replaced by
// that URL's HTML fragment every 15 s while the page is visible (Activity's figures and charts).
(function () {
  var section = document.querySelector("[data-live-section]");
  if (!section) return;
  function refresh() {
    if (document.hidden) return;
    fetch(section.getAttribute("data-live-section"), {credentials: "same-origin"})
      .then(function (r) { return r.ok ? r.text() : null; })
      .then(function (html) { if (html !== null) { section.innerHTML = html; section.dataset.refreshed = Date.now(); } })
      .catch(function () {});
  }
  setInterval(refresh, 15000);
})();
