// Package login owns the browser login pages under /ui/login/: login name,
// password, forced password change, account selection, registration, the
// error page and the logged-out page. Pages are html/template with embedded
// CSS, need no JavaScript, are translated (en, de: ui_locales, then
// Accept-Language) and every form carries a CSRF token bound to the
// browser's user agent. It depends on package authorize (the pending
// request and its completion), package session and the directory
// (password checks, password change, registration).
package login
