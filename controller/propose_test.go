package controller

import (
	"testing"
	"time"
)

// TestProposerCountsThePushesTheLogRecords: the attempts a controller
// made are counted from the log's started breakglass.proposed records, so
// a restart (an empty tries map) neither starts the count again nor
// forgets the backoff; attempts that failed before any push only the
// process that made them counts.
func TestProposerCountsThePushesTheLogRecords(t *testing.T) {
	opened := time.Date(2026, 12, 7, 3, 0, 0, 0, time.UTC)
	p := &Proposer{After: time.Minute, Attempts: 3}
	at := func(minutes ...int) []time.Time {
		var ts []time.Time
		for _, m := range minutes {
			ts = append(ts, opened.Add(time.Duration(m)*time.Minute))
		}
		return ts
	}
	for name, tc := range map[string]struct {
		was    try
		pushes []time.Time
		want   try
	}{
		"nothing yet: the break-glass run's turn first":               {try{}, nil, try{next: opened.Add(time.Minute)}},
		"restarted after two pushes: the third waits twice as long":   {try{}, at(1, 2), try{n: 2, next: opened.Add(4 * time.Minute)}},
		"restarted after the last push: given up":                     {try{}, at(1, 2, 4), try{n: 3, next: opened.Add(8 * time.Minute), done: true}},
		"this process's clones that failed before any push count too": {try{n: 2, next: opened.Add(5 * time.Minute)}, at(1), try{n: 2, next: opened.Add(5 * time.Minute)}},
		"someone else's push since this process's last attempt":       {try{n: 1, next: opened.Add(2 * time.Minute)}, at(1, 3), try{n: 2, next: opened.Add(5 * time.Minute)}},
	} {
		if got := p.schedule(tc.was, opened, tc.pushes); got != tc.want {
			t.Errorf("%s: %+v, want %+v", name, got, tc.want)
		}
	}
}
