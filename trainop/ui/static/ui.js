// trainop UI: progressive enhancement only; every page works without this file.
"use strict";
(function () {
  // Writes carry the page's CSRF token also when htmx sends them.
  document.addEventListener("htmx:configRequest", function (e) {
    var meta = document.querySelector('meta[name="csrf-token"]');
    if (meta) e.detail.headers["X-CSRF-Token"] = meta.content;
  });

  // Actions ask first.
  document.addEventListener("submit", function (e) {
    var form = e.target;
    var question = form.getAttribute("data-confirm");
    if (question && !window.confirm(question)) e.preventDefault();
  });

  // Copy buttons (hidden without this file): the text of the element they name, to the clipboard.
  function showCopyButtons() {
    document.querySelectorAll("button[data-copy]").forEach(function (b) { b.hidden = false; });
  }
  document.addEventListener("click", function (e) {
    var button = e.target.closest("button[data-copy]");
    if (!button) return;
    var source = document.getElementById(button.getAttribute("data-copy"));
    if (!source || !navigator.clipboard) return;
    navigator.clipboard.writeText(source.textContent).then(function () { button.textContent = "Copied"; });
  });

  document.addEventListener("change", function (e) {
    if (e.target.matches("select[data-autosubmit]")) e.target.form.submit();
  });

  function open(url, handlers) {
    var source = new EventSource(url);
    Object.keys(handlers).forEach(function (name) {
      source.addEventListener(name, function (e) { handlers[name](JSON.parse(e.data), source); });
    });
    source.addEventListener("done", function () { source.close(); });
    return source;
  }

  // The list: cells change in place; rows are never added, removed or reordered under the reader.
  var listStream = null;
  function watchList() {
    if (listStream) { listStream.close(); listStream = null; }
    var table = document.querySelector("table.jobs[data-stream]");
    if (!table) return;
    var keys = Array.prototype.map.call(table.querySelectorAll("tbody tr[data-key]"), function (tr) {
      return "key=" + encodeURIComponent(tr.getAttribute("data-key"));
    });
    if (!keys.length) return;
    listStream = open(table.getAttribute("data-stream") + "?" + keys.join("&"), {
      cells: function (cells) {
        Object.keys(cells).forEach(function (id) {
          var cell = document.getElementById(id);
          if (cell && cell.innerHTML !== cells[id]) {
            cell.innerHTML = cells[id];
            // The duration changes every second: only news is highlighted.
            if (!/-duration$/.test(id)) {
              cell.classList.remove("changed"); void cell.offsetWidth; cell.classList.add("changed");
            }
          }
        });
      },
    });
  }

  // A job's page: its changing parts are replaced whole.
  function watchJob() {
    var job = document.querySelector("div.job[data-stream]");
    if (!job) return;
    open(job.getAttribute("data-stream"), {
      parts: function (parts) {
        Object.keys(parts).forEach(function (name) {
          var el = job.querySelector('[data-part="' + name + '"]');
          if (el) el.innerHTML = parts[name];
        });
      },
    });
  }

  // Logs: appended as text (never parsed as HTML), the oldest lines dropped past data-max.
  function followLog() {
    var pre = document.querySelector("pre.log[data-stream]");
    if (!pre) return;
    var max = parseInt(pre.getAttribute("data-max"), 10) || 2000;
    var lines = [];
    function render(stick) {
      if (lines.length > max) lines.splice(0, lines.length - max);
      pre.textContent = lines.length ? lines.join("\n") + "\n" : "";
      if (stick) pre.scrollTop = pre.scrollHeight;
    }
    function atBottom() { return pre.scrollHeight - pre.scrollTop - pre.clientHeight < 30; }
    open(pre.getAttribute("data-stream"), {
      reset: function (batch) { lines = batch.slice(); render(true); },
      lines: function (batch) { var stick = atBottom(); lines.push.apply(lines, batch); render(stick); },
    });
  }

  document.addEventListener("DOMContentLoaded", function () {
    watchList(); watchJob(); followLog(); showCopyButtons();
  });
  // A filter swapped the table: follow the rows it shows now.
  document.addEventListener("htmx:afterSettle", function (e) {
    if (e.target.id === "jobs") watchList();
  });
})();
