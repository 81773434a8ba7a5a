package config

// HTTP is the API and metrics listener.
type HTTP struct {
	Addr string `yaml:"addr"`
	// TokenFile is a file holding a bearer token (surrounding white space
	// is trimmed); when set, every endpoint but the probes and the
	// dashboard's static files requires "Authorization: Bearer <token>"
	// (see package api). `streamlearn run` reads it at start; the
	// environment variable STREAMLEARN_HTTP_TOKEN and the flag
	// --http-token-file override it.
	TokenFile string `yaml:"token_file"`
}
