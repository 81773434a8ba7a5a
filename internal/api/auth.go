package api

import (
	"crypto/sha256"
	"crypto/subtle"
	"errors"
	"net/http"
	"strings"
)

// publicPaths are served without the bearer token. The probes, because
// Kubernetes' httpGet probes (and most load balancers' health checks)
// cannot send a token, and they reveal nothing but up and started; the
// dashboard's page, script, style sheet and icon, because a browser's
// top-level navigation and subresource loads cannot send one either, and
// they are the same constant files in every binary. The page then reads
// the token from its URL's fragment and sends it with every request for
// data (see app.js), so everything that carries data — the reports,
// curves, metrics, learners and predictions — needs it.
var publicPaths = map[string]bool{
	"/healthz":            true,
	"/readyz":             true,
	"/":                   true,
	"/dashboard/app.js":   true,
	"/dashboard/app.css":  true,
	"/dashboard/icon.svg": true,
}

// CheckToken reports whether token can be a bearer token: not empty, and
// only the characters of RFC 6750's b64token (letters, digits and
// -._~+/ with trailing '='), so that it passes through an Authorization
// header, a URL fragment and a shell unchanged. `openssl rand -hex 32`
// and `openssl rand -base64 32` make good ones.
func CheckToken(token string) error {
	if token == "" {
		return errors.New("the token is empty")
	}
	body := strings.TrimRight(token, "=")
	if body == "" {
		return errors.New("the token is only '=' characters")
	}
	for i := 0; i < len(body); i++ {
		c := body[i]
		switch {
		case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9':
		case c == '-' || c == '.' || c == '_' || c == '~' || c == '+' || c == '/':
		default:
			return errors.New("the token has a character other than letters, digits, -._~+/ and trailing = (RFC 6750 b64token)")
		}
	}
	return nil
}

// requireToken wraps next so that every request but those for publicPaths
// needs "Authorization: Bearer <token>"; others get 401 with a
// WWW-Authenticate challenge (RFC 6750) and a one-line reason. Tokens are
// compared as SHA-256 digests in constant time (crypto/subtle), so that
// neither the time taken nor an early exit tells how much of a guess was
// right, or how long the token is.
func requireToken(token string, next http.Handler) http.Handler {
	want := sha256.Sum256([]byte(token))
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if publicPaths[r.URL.Path] {
			next.ServeHTTP(w, r)
			return
		}
		got, ok := bearer(r.Header.Get("Authorization"))
		if !ok {
			w.Header().Set("WWW-Authenticate", `Bearer realm="streamlearn"`)
			fail(w, http.StatusUnauthorized, "unauthorized", `send "Authorization: Bearer <token>" (the token of http.token_file or STREAMLEARN_HTTP_TOKEN)`)
			return
		}
		sum := sha256.Sum256([]byte(got))
		if subtle.ConstantTimeCompare(sum[:], want[:]) != 1 {
			w.Header().Set("WWW-Authenticate", `Bearer realm="streamlearn", error="invalid_token"`)
			fail(w, http.StatusUnauthorized, "unauthorized", "wrong bearer token")
			return
		}
		next.ServeHTTP(w, r)
	})
}

// bearer returns the token of an Authorization header value "Bearer
// <token>" (the scheme in any case, RFC 7235 §2.1).
func bearer(h string) (string, bool) {
	scheme, tok, ok := strings.Cut(h, " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") {
		return "", false
	}
	tok = strings.TrimLeft(tok, " ")
	return tok, tok != ""
}

// limitBodies caps every request body at MaxPredictBody, whatever the
// handler, so that no endpoint, present or future, reads an unbounded
// body. (POST /v1/predict, the one endpoint with a body, also checks it
// itself to answer 413.)
func limitBodies(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Body != nil && r.Body != http.NoBody {
			r.Body = http.MaxBytesReader(w, r.Body, MaxPredictBody)
		}
		next.ServeHTTP(w, r)
	})
}
