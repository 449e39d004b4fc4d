// Package contexts stores the CLI's named contexts (an issuer, how to sign
// in, the tokens) in $XDG_CONFIG_HOME/gatehouse/contexts.json. The file
// holds refresh tokens and key files, so it is written 0600 in a 0700
// directory, atomically (a crash never leaves half a file).
package contexts

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"time"
)

// Kinds of sign-in.
const (
	KindKey     = "key"     // a machine user's key file (JWT profile grant)
	KindBrowser = "browser" // a person, authorization code + PKCE
)

// Context is one Gatehouse instance and identity.
type Context struct {
	Issuer string `json:"issuer"`
	Kind   string `json:"kind"`
	// Org is the default --org of this context (name or id), may be empty.
	Org string `json:"org,omitempty"`
	// ClientID of a browser login (the native admin app).
	ClientID string `json:"clientId,omitempty"`
	// KeyFile is the machine user's key file (JSON), for KindKey.
	KeyFile json.RawMessage `json:"keyFile,omitempty"`

	AccessToken  string    `json:"accessToken,omitempty"`
	RefreshToken string    `json:"refreshToken,omitempty"`
	Expiry       time.Time `json:"expiry,omitzero"`
}

// File is the whole store.
type File struct {
	Current  string              `json:"current,omitempty"`
	Contexts map[string]*Context `json:"contexts"`
}

// Store reads and writes the file at Path.
type Store struct{ Path string }

// DefaultPath is $XDG_CONFIG_HOME/gatehouse/contexts.json (os.UserConfigDir).
func DefaultPath() (string, error) {
	dir, err := os.UserConfigDir()
	if err != nil {
		return "", fmt.Errorf("config directory: %w", err)
	}
	return filepath.Join(dir, "gatehouse", "contexts.json"), nil
}

// Load returns the stored contexts; a missing file is an empty store.
func (s Store) Load() (*File, error) {
	f := &File{Contexts: map[string]*Context{}}
	raw, err := os.ReadFile(s.Path)
	if errors.Is(err, os.ErrNotExist) {
		return f, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read contexts: %w", err)
	}
	if err := json.Unmarshal(raw, f); err != nil {
		return nil, fmt.Errorf("read contexts %s: %w", s.Path, err)
	}
	if f.Contexts == nil {
		f.Contexts = map[string]*Context{}
	}
	return f, nil
}

// Save writes the file (0600) through a temporary file and a rename.
func (s Store) Save(f *File) error {
	if err := os.MkdirAll(filepath.Dir(s.Path), 0o700); err != nil {
		return fmt.Errorf("save contexts: %w", err)
	}
	raw, err := json.MarshalIndent(f, "", "  ")
	if err != nil {
		return fmt.Errorf("save contexts: %w", err)
	}
	tmp, err := os.CreateTemp(filepath.Dir(s.Path), ".contexts-*")
	if err != nil {
		return fmt.Errorf("save contexts: %w", err)
	}
	defer os.Remove(tmp.Name())
	if err := tmp.Chmod(0o600); err != nil {
		tmp.Close()
		return fmt.Errorf("save contexts: %w", err)
	}
	if _, err := tmp.Write(append(raw, '\n')); err != nil {
		tmp.Close()
		return fmt.Errorf("save contexts: %w", err)
	}
	if err := tmp.Close(); err != nil {
		return fmt.Errorf("save contexts: %w", err)
	}
	if err := os.Rename(tmp.Name(), s.Path); err != nil {
		return fmt.Errorf("save contexts: %w", err)
	}
	return nil
}

// Names returns the context names, sorted.
func (f *File) Names() []string {
	names := make([]string, 0, len(f.Contexts))
	for n := range f.Contexts {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// Get returns the named context, or the current one when name is empty.
func (f *File) Get(name string) (string, *Context, error) {
	if name == "" {
		name = f.Current
	}
	if name == "" {
		return "", nil, errors.New("not logged in: run gatehouse login --issuer URL")
	}
	c, ok := f.Contexts[name]
	if !ok {
		return "", nil, fmt.Errorf("no context %q (gatehouse context list)", name)
	}
	return name, c, nil
}
