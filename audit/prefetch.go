package audit

import (
	"context"
	"errors"
	"slices"
	"strings"
)

// prefetchChunk is how long, in characters, the values one listing asks
// for may be together, so that its URL stays short for every proxy on the
// way (session ids are the annotation's, and anyone on-call can make them
// long).
const prefetchChunk = 2000

// Prefetch reads the records of many sessions and many applications at
// once, a listing per 2,000 characters of values, and returns a Store that
// answers Entries for one of them (Filter with only Session, or only App,
// set) from what it read: the entries the store's own narrowed listing
// would have given, in the same order (a listing's: by name, which is
// position order). Everything else, and every value a label cannot hold,
// goes to s. A store that cannot list by many values at once (the file
// store) is returned as it is. Nothing read is trusted more for it:
// callers decode and check records as before.
func Prefetch(ctx context.Context, s Store, sessions, apps []string) (Store, error) {
	cm, ok := s.(*ConfigMapStore)
	if !ok {
		return s, nil
	}
	p := &prefetched{Store: s, by: map[string]map[string][]Entry{LabelSession: {}, LabelApp: {}}}
	// The two readings overlap: each files into its own label's map.
	var appsErr error
	done := make(chan struct{})
	go func() {
		defer close(done)
		appsErr = p.read(ctx, cm, LabelApp, apps)
	}()
	sessionsErr := p.read(ctx, cm, LabelSession, sessions)
	<-done
	if err := errors.Join(sessionsErr, appsErr); err != nil {
		return nil, err
	}
	return p, nil
}

// prefetched is a Store whose narrowed Entries come from one read.
type prefetched struct {
	Store
	// by holds, for each label, each value read and its entries.
	by map[string]map[string][]Entry
}

// read lists the records labelled with one of values under label, and
// files them by value (a value with none gets an empty list: known empty).
func (p *prefetched) read(ctx context.Context, cm *ConfigMapStore, label string, values []string) error {
	var wanted []string
	for _, v := range values {
		if labelValueOK(v) && !slices.Contains(wanted, v) {
			wanted = append(wanted, v)
		}
	}
	for _, chunk := range chunks(wanted, prefetchChunk) {
		selector := RecordSelector + "," + label + " in (" + strings.Join(chunk, ",") + ")"
		for _, v := range chunk {
			p.by[label][v] = []Entry{}
		}
		if err := cm.walkSelected(ctx, selector, func(e Entry) error {
			if list, ok := p.by[label][e.Labels[label]]; ok {
				p.by[label][e.Labels[label]] = append(list, e)
			}
			return nil
		}); err != nil {
			return err
		}
	}
	return nil
}

// chunks splits values into runs whose lengths add up to at most size
// (a longer value alone).
func chunks(values []string, size int) [][]string {
	var out [][]string
	length := size
	for _, v := range values {
		if length+len(v) > size {
			out, length = append(out, nil), 0
		}
		out[len(out)-1] = append(out[len(out)-1], v)
		length += len(v) + 1
	}
	return out
}

// Entries implements Store.
func (p *prefetched) Entries(ctx context.Context, filter Filter) ([]Entry, error) {
	label, value := "", ""
	switch {
	case filter.Event != "":
	case filter.Session != "" && filter.App == "":
		label, value = LabelSession, filter.Session
	case filter.App != "" && filter.Session == "":
		label, value = LabelApp, filter.App
	}
	if entries, ok := p.by[label][value]; ok {
		return slices.Clone(entries), nil
	}
	return p.Store.Entries(ctx, filter)
}
