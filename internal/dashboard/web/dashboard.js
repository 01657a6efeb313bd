// Live updates of the uprev dashboard: the server sends the page's main
// element again after every change in the cluster, as a server-sent event
// named "page"; it replaces the one shown, without reloading the page.
(function () {
  "use strict";
  var main = document.getElementById("main");
  var live = document.getElementById("live");
  var source = new EventSource("/events");
  source.addEventListener("page", function (e) {
    main.innerHTML = e.data;
    live.textContent = "live";
    live.className = "live on";
  });
  source.onerror = function () {
    live.textContent = "reconnecting…";
    live.className = "live off";
  };
})();
