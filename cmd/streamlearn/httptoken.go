package main

import (
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/streamlearn/streamlearn/internal/api"
)

// tokenEnv names the environment variable holding the HTTP API's bearer
// token (the token itself, not a file).
const tokenEnv = "STREAMLEARN_HTTP_TOKEN"

// maxTokenFile bounds what is read of a token file: a token is tens of
// bytes; a bigger file is a mistake (the wrong path).
const maxTokenFile = 4096

// httpToken returns the bearer token the HTTP API requires, "" for none:
// the contents of flagFile (--http-token-file) if set, else $STREAMLEARN_HTTP_TOKEN
// if set, else the contents of cfgFile (http.token_file) if set. White
// space around a token is trimmed. An empty token, or one that is not an
// RFC 6750 b64token (api.CheckToken), is an error naming where it came
// from: a service started with a token setting must never run without
// authentication. The file's permissions are not checked: Kubernetes
// mounts secrets readable by every user (mode 0644) by default; keep the
// file where only the service's user can read it.
func httpToken(flagFile, cfgFile string, lookupEnv func(string) (string, bool)) (string, error) {
	switch env, ok := lookupEnv(tokenEnv); {
	case flagFile != "":
		return tokenFromFile("--http-token-file", flagFile)
	case ok:
		tok := strings.TrimSpace(env)
		if err := api.CheckToken(tok); err != nil {
			return "", fmt.Errorf("%s: %v", tokenEnv, err)
		}
		return tok, nil
	case cfgFile != "":
		return tokenFromFile("http.token_file", cfgFile)
	}
	return "", nil
}

func tokenFromFile(what, path string) (string, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", fmt.Errorf("%s: %w", what, err)
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, maxTokenFile+1))
	if err != nil {
		return "", fmt.Errorf("%s: %w", what, err)
	}
	if len(b) > maxTokenFile {
		return "", fmt.Errorf("%s: %s is longer than %d bytes: not a token file", what, path, maxTokenFile)
	}
	tok := strings.TrimSpace(string(b))
	if err := api.CheckToken(tok); err != nil {
		return "", fmt.Errorf("%s: %s: %v", what, path, err)
	}
	return tok, nil
}
