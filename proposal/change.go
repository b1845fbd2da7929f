package proposal

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
)

// Change is a proposal's edit of a source: the files it writes and what
// the source renders before and after them.
type Change struct {
	// Files are the files written (new ones too), Old what each held
	// before (no data for a new file).
	Files, Old []File
	// Before and After are the objects the source renders.
	Before, After []Document
	// Placed is the file each edit is written to, in the edits' order
	// ("" where the source renders the value already).
	Placed []string
}

// App is the Application a source renders for: its name (Helm's release
// name unless the spec names one) and its destination namespace.
type App struct {
	Name, Namespace string
}

// Make computes the change that makes source (of kind, checked out at
// root) render edits, and verifies it by rendering the source before and
// after the way Argo CD does: the patched paths hold the edits' values and
// nothing else changes. session names files it adds.
func Make(ctx context.Context, root, kind string, src Source, app App, edits []Edit, session string) (*Change, error) {
	var (
		c   *Change
		err error
	)
	switch kind {
	case KindKustomize:
		c, err = kustomizeChange(root, src.Path, app.Namespace, edits, session)
	case KindHelm:
		c, err = helmChange(ctx, root, src, app, edits)
	default:
		c, err = directoryChange(root, src, app.Namespace, edits)
	}
	if err != nil {
		return nil, err
	}
	// A file that already says what the edit writes is not part of it.
	files, old := c.Files[:0], c.Old[:0]
	for i, f := range c.Files {
		if c.Old[i].Data == nil || !bytes.Equal(c.Old[i].Data, f.Data) {
			files, old = append(files, f), append(old, c.Old[i])
		}
	}
	c.Files, c.Old = files, old
	return c, nil
}

// directoryChange edits plain manifests where they define each target.
func directoryChange(root string, src Source, namespace string, edits []Edit) (*Change, error) {
	files, err := ReadDirectory(root, src.Path, src.Recurse)
	if err != nil {
		return nil, err
	}
	edited, err := EditFiles(files, namespace, edits)
	if err != nil {
		return nil, err
	}
	c := &Change{Files: edited}
	for _, f := range edited {
		c.Old = append(c.Old, fileNamed(files, f.Path))
	}
	after := append([]File(nil), files...)
	for i, f := range after {
		for _, ed := range c.Files {
			if ed.Path == f.Path {
				after[i] = ed
			}
		}
	}
	if err := Verify(files, after, namespace, edits); err != nil {
		return nil, err
	}
	if c.Before, err = Documents(files); err != nil {
		return nil, err
	}
	if c.After, err = Documents(after); err != nil {
		return nil, err
	}
	for _, e := range edits {
		where := ""
		for _, d := range c.After {
			if d.Matches(e.Target, namespace) {
				where = d.File
			}
		}
		c.Placed = append(c.Placed, where)
	}
	return c, nil
}

// withFiles writes files over the checkout at root, runs fn, and puts the
// checkout back as it was, so that a renderer reading the disk sees the
// change and the next attempt starts clean.
func withFiles(root string, files []File, fn func() error) (err error) {
	type saved struct {
		path string
		data []byte
		mode os.FileMode
		made bool
	}
	var undo []saved
	defer func() {
		for i := len(undo) - 1; i >= 0; i-- {
			u := undo[i]
			var e error
			if u.made {
				e = os.Remove(u.path)
			} else {
				e = os.WriteFile(u.path, u.data, u.mode)
			}
			err = errors.Join(err, e)
		}
	}()
	for _, f := range files {
		full := filepath.Join(root, filepath.FromSlash(f.Path))
		s := saved{path: full, mode: 0o644}
		if info, err := os.Stat(full); err == nil {
			if s.data, err = os.ReadFile(full); err != nil {
				return err
			}
			s.mode = info.Mode().Perm()
		} else if errors.Is(err, os.ErrNotExist) {
			s.made = true
		} else {
			return err
		}
		if err := os.WriteFile(full, f.Data, s.mode); err != nil {
			return fmt.Errorf("writing %s: %w", f.Path, err)
		}
		undo = append(undo, s)
	}
	return fn()
}

// readFile is the file at path (slash-separated, relative to root).
func readFile(root, path string) (File, error) {
	data, err := os.ReadFile(filepath.Join(root, filepath.FromSlash(path)))
	return File{Path: path, Data: data}, err
}
