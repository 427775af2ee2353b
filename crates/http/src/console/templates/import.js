// The import form's progress bar. The form works without this script (a plain upload,
// then the report page); with it, the file goes up by XMLHttpRequest so its progress can
// be shown. The server stores rows as it reads them and reads no faster than it stores,
// so the upload's progress is the import's progress.
(function () {
  "use strict";
  var form = document.getElementById("import-form");
  if (!form || !window.XMLHttpRequest || !window.FormData || !window.DOMParser) {
    return;
  }
  var area = document.getElementById("import-progress-area");
  var bar = document.getElementById("import-progress");
  var text = document.getElementById("import-progress-text");
  var events = 0;
  function show(percent, message) {
    bar.value = percent;
    bar.textContent = percent + "%";
    text.textContent = message;
  }
  form.addEventListener("submit", function (event) {
    event.preventDefault();
    var button = form.querySelector("button[type=submit]");
    var request = new XMLHttpRequest();
    events = 0;
    area.hidden = false;
    button.disabled = true;
    show(0, "Importing…");
    request.upload.addEventListener("progress", function (progress) {
      if (progress.lengthComputable && progress.total > 0) {
        events += 1;
        bar.setAttribute("data-events", String(events));
        var percent = Math.floor((progress.loaded * 100) / progress.total);
        show(percent, "Importing: " + percent + "% of the file read and stored.");
      }
    });
    request.addEventListener("load", function () {
      var page = new DOMParser().parseFromString(request.responseText, "text/html");
      var result = page.getElementById("import-result");
      var here = document.getElementById("import-result");
      if (result && here) {
        here.replaceWith(result);
        show(100, request.status < 400 ? "Done." : "Stopped: see below.");
      } else {
        show(bar.value, "The import answered with status " + request.status + ".");
      }
      bar.setAttribute("data-done", "1");
      button.disabled = false;
    });
    request.addEventListener("error", function () {
      show(bar.value, "The upload failed; nothing after the last stored batch was imported.");
      bar.setAttribute("data-done", "1");
      button.disabled = false;
    });
    request.open("POST", form.action);
    request.send(new FormData(form));
  });
})();
