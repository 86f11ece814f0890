// The vgpu web view's one script: keep the page current without a reload.
// Every few seconds it asks /api/status.json; when the data changed (a new generation) it
// fetches this same page and swaps in its <main> (parsed as an inert document: nothing in it
// runs, and the server has escaped every name). It marks the page stale when the server's
// data is old or the server cannot be reached. Without it the page is plain HTML that a
// reload refreshes.
"use strict";
(function () {
  var status = document.getElementById("status");
  var main = document.getElementById("main");
  if (!status || !main) { return; }
  document.documentElement.setAttribute("data-live", "on");  // the page updates itself
  var generation = status.getAttribute("data-generation");
  var interval = 5000;

  function show(text, cls) {
    status.textContent = text;
    status.className = cls;
  }

  function describe(s) {
    var parts = ["Read at " + (s.readAt || "never")];
    if (s.takenAt) { parts.push("snapshot taken at " + s.takenAt); }
    if (s.error) { parts.push("last read failed: " + s.error); }
    if (s.extender) { parts.push(s.extender); }
    return parts.join(" \u00b7 ") + (s.stale ? " (stale)" : "");
  }

  function swap() {
    return fetch(window.location.href, { cache: "no-store" })
      .then(function (r) { return r.text(); })
      .then(function (text) {
        var fresh = new DOMParser().parseFromString(text, "text/html").getElementById("main");
        if (fresh) { main.replaceChildren.apply(main, Array.from(fresh.childNodes)); }
      });
  }

  function poll() {
    fetch("/api/status.json", { cache: "no-store" })
      .then(function (r) { return r.json(); })
      .then(function (s) {
        interval = Math.max(1000, (s.intervalSeconds || 5) * 1000);
        show(describe(s), s.stale ? "stale" : (s.extenderUp === false ? "down" : ""));
        status.setAttribute("data-generation", String(s.generation));
        // Never under the user's hands: while a field or a link in the page has the keyboard's
        // focus the swap waits (it would lose the focus), and comes at the next poll after.
        var focused = document.activeElement;
        var busy = focused && focused !== document.body && main.contains(focused);
        if (String(s.generation) !== generation && !busy) {
          generation = String(s.generation);
          return swap();
        }
      })
      .catch(function () {
        show("The view's server cannot be reached: the page shows the last data read (stale).",
             "unreachable");
      })
      .then(function () { window.setTimeout(poll, interval); });
  }
  window.setTimeout(poll, 1000);
})();
