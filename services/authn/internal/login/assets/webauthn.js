// Gatehouse's WebAuthn ceremony: the one script of the login and account
// pages, loaded only by a page with a form[data-webauthn] (its options,
// as the server sent them) and allowed by that response's CSP nonce.
// Submitting the form asks the browser for a credential
// (data-ceremony "create") or an assertion ("get"), puts the answer as
// JSON into the form's "credential" field and submits it. Everything else
// the pages do works without JavaScript.
(function () {
  "use strict";

  function decode(s) {
    var b = atob(s.replace(/-/g, "+").replace(/_/g, "/") + "===".slice((s.length + 3) % 4));
    var out = new Uint8Array(b.length);
    for (var i = 0; i < b.length; i++) out[i] = b.charCodeAt(i);
    return out.buffer;
  }

  function encode(buf) {
    var bytes = new Uint8Array(buf), s = "";
    for (var i = 0; i < bytes.length; i++) s += String.fromCharCode(bytes[i]);
    return btoa(s).replace(/\+/g, "-").replace(/\//g, "_").replace(/=+$/, "");
  }

  function ids(list) {
    (list || []).forEach(function (c) { c.id = decode(c.id); });
  }

  function start(form) {
    var failed = form.querySelector("[data-webauthn-error]");
    if (!window.PublicKeyCredential || !navigator.credentials) {
      if (failed) failed.hidden = false;
      return;
    }
    form.addEventListener("submit", function (ev) {
      ev.preventDefault();
      if (failed) failed.hidden = true;
      var create = form.dataset.ceremony === "create";
      var opts = JSON.parse(form.dataset.webauthn).publicKey;
      opts.challenge = decode(opts.challenge);
      if (create) {
        opts.user.id = decode(opts.user.id);
        ids(opts.excludeCredentials);
      } else {
        ids(opts.allowCredentials);
      }
      var ask = create ? navigator.credentials.create({ publicKey: opts }) : navigator.credentials.get({ publicKey: opts });
      ask.then(function (cred) {
        var r = cred.response;
        var out = { id: cred.id, rawId: encode(cred.rawId), type: cred.type, response: { clientDataJSON: encode(r.clientDataJSON) } };
        if (create) {
          out.response.attestationObject = encode(r.attestationObject);
          if (r.getTransports) out.response.transports = r.getTransports();
        } else {
          out.response.authenticatorData = encode(r.authenticatorData);
          out.response.signature = encode(r.signature);
          if (r.userHandle) out.response.userHandle = encode(r.userHandle);
        }
        if (cred.authenticatorAttachment) out.authenticatorAttachment = cred.authenticatorAttachment;
        form.elements.credential.value = JSON.stringify(out);
        form.submit();
      }).catch(function () {
        if (failed) failed.hidden = false;
      });
    });
  }

  document.addEventListener("DOMContentLoaded", function () {
    var forms = document.querySelectorAll("form[data-webauthn]");
    for (var i = 0; i < forms.length; i++) start(forms[i]);
  });
})();
