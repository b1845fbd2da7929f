package argocd

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
)

// schemaAnswer is what AutomatedSchema learns from a schema document.
type schemaAnswer struct {
	Found   bool `json:"found"`
	Enabled bool `json:"enabled"`
}

// schemaCache keeps AutomatedSchema's answer for one schema document in
// dir. The API server names each document by the hash of its content
// (?hash= in its URL, as kubectl's cache relies on), so an answer kept
// under that name never goes stale; a URL without a hash is not kept.
type schemaCache struct{ file string }

func (c *Client) schemaCache(url string) schemaCache {
	if c.CacheDir == "" || !strings.Contains(url, "hash=") {
		return schemaCache{}
	}
	sum := sha256.Sum256([]byte(url))
	return schemaCache{file: filepath.Join(c.CacheDir, "schema", hex.EncodeToString(sum[:16])+".json")}
}

func (s schemaCache) load() (schemaAnswer, bool) {
	var a schemaAnswer
	if s.file == "" {
		return a, false
	}
	b, err := os.ReadFile(s.file)
	if err != nil || json.Unmarshal(b, &a) != nil {
		return a, false
	}
	return a, true
}

// store keeps a; a cache that cannot be written is no error, the next
// command reads the document again.
func (s schemaCache) store(a schemaAnswer) {
	if s.file == "" {
		return
	}
	b, _ := json.Marshal(a)
	if os.MkdirAll(filepath.Dir(s.file), 0o750) != nil {
		return
	}
	tmp, err := os.CreateTemp(filepath.Dir(s.file), ".schema-*")
	if err != nil {
		return
	}
	_, werr := tmp.Write(b)
	if cerr := tmp.Close(); werr != nil || cerr != nil || os.Rename(tmp.Name(), s.file) != nil {
		os.Remove(tmp.Name())
	}
}
