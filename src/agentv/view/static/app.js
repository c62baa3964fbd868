// agentv view: the little the pages need beyond HTML. Filters apply when a choice changes.
"use strict";
document.addEventListener("DOMContentLoaded", () => {
  for (const select of document.querySelectorAll("select[data-autosubmit]")) {
    select.addEventListener("change", () => {
      const form = select.form;
      const page = form.querySelector("input[name=page]");
      if (page) page.remove();
      form.requestSubmit();
    });
  }
  document.body.dataset.ready = "1";
});
