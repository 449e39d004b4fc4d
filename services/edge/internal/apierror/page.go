package apierror

import (
	"html"
	"net/http"
)

// titles are the headings of the error pages, by code.
var titles = map[string]string{
	NotFound:               "Not found",
	RateLimited:            "Too many requests",
	RequestTooLarge:        "Request too large",
	TemporarilyUnavailable: "Temporarily unavailable",
	ServerError:            "Something went wrong",
}

// WritePage answers status with a small HTML page naming the condition
// (no script, no external resource; never cached). A Retry-After set by
// the caller stays, and the page says to try again when there is one.
func WritePage(w http.ResponseWriter, status int, code, description string) {
	title := titles[code]
	if title == "" {
		title = http.StatusText(status)
	}
	b := []byte(`<!doctype html>
<html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width, initial-scale=1">
<title>` + html.EscapeString(title) + `</title></head>
<body><main><h1>` + html.EscapeString(title) + `</h1>
`)
	if description != "" {
		b = append(b, "<p>"+html.EscapeString(description)+"</p>\n"...)
	}
	if w.Header().Get("Retry-After") != "" {
		b = append(b, "<p>Please try again in a few seconds.</p>\n"...)
	}
	b = append(b, "</main></body></html>\n"...)
	write(w, status, "text/html; charset=utf-8", b)
}
