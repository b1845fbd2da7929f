package controller

import (
	"testing"
	"time"
)

func TestEarliest(t *testing.T) {
	now := time.Now()
	later := now.Add(time.Minute)
	for _, tc := range []struct{ a, b, want time.Time }{
		{time.Time{}, time.Time{}, time.Time{}},
		{time.Time{}, later, later},
		{later, time.Time{}, later},
		{now, later, now},
		{later, now, now},
	} {
		if got := earliest(tc.a, tc.b); !got.Equal(tc.want) {
			t.Errorf("earliest(%v, %v) = %v, want %v", tc.a, tc.b, got, tc.want)
		}
	}
}

// Reminders fall at the notice's time plus whole multiples of the
// interval, so a replica that takes over keeps the schedule of the one
// before it.
func TestReminderDue(t *testing.T) {
	at := time.Date(2026, 12, 3, 10, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		now, want time.Time
	}{
		{at, at},
		{at.Add(59 * time.Minute), at},
		{at.Add(time.Hour), at.Add(time.Hour)},
		{at.Add(150 * time.Minute), at.Add(2 * time.Hour)},
		{at.Add(-time.Minute), at}, // a clock behind the record's writer
	} {
		if got := reminderDue(at, time.Hour, tc.now); !got.Equal(tc.want) {
			t.Errorf("reminderDue at %s = %s, want %s", tc.now.Format("15:04"), got.Format("15:04"), tc.want.Format("15:04"))
		}
	}
}
