package audit

import (
	"context"
	"encoding/json"
	"fmt"
	"time"
)

// MirrorStateName is the ConfigMap, beside the log, where the controller's
// leader publishes where its mirror stands, for status to show without
// reaching /metrics. Only the controller writes it (deploy/policy).
const MirrorStateName = "kubectl-gitops-mirror-status"

// MirrorState is where the mirror stood when the leader last looked.
type MirrorState struct {
	// Mirror is the mirror's location, s3://BUCKET/PREFIX.
	Mirror string `json:"mirror"`
	// WriteOnce is whether the bucket has versioning and Object Lock
	// (false: accepted without, --mirror-accept-unlocked).
	WriteOnce bool `json:"writeOnce"`
	// Newest is the newest record the mirror holds; Backlog the records
	// the cluster's log holds past it, the oldest of them created at
	// OldestUnmirrored (nil: none waits).
	Newest           uint64     `json:"newest"`
	Backlog          uint64     `json:"backlog"`
	OldestUnmirrored *time.Time `json:"oldestUnmirrored,omitempty"`
	// PrunedThrough is the last record pruned from the cluster (0: none).
	PrunedThrough uint64 `json:"prunedThrough,omitempty"`
	// Leader is the replica that published it, at Published.
	Leader    string    `json:"leader"`
	Published time.Time `json:"published"`
}

// Same is whether s and o say the same of the mirror, whenever and by
// whom published.
func (s MirrorState) Same(o MirrorState) bool {
	s.Leader, s.Published, o.Leader, o.Published = "", time.Time{}, "", time.Time{}
	sameOldest := (s.OldestUnmirrored == nil) == (o.OldestUnmirrored == nil) &&
		(s.OldestUnmirrored == nil || s.OldestUnmirrored.Equal(*o.OldestUnmirrored))
	s.OldestUnmirrored, o.OldestUnmirrored = nil, nil
	return s == o && sameOldest
}

// PublishMirrorState writes st into the log's namespace.
func (s *ConfigMapStore) PublishMirrorState(ctx context.Context, st MirrorState) error {
	body, err := json.Marshal(st)
	if err != nil {
		return err
	}
	err = s.upsert(ctx, MirrorStateName, nil, map[string]string{"state": string(body)})
	if err != nil {
		return fmt.Errorf("publishing the mirror's state: %w", err)
	}
	return nil
}

// MirrorState reads what the controller last published, nil when it
// never did (no mirror, or no controller with one ever led).
func (s *ConfigMapStore) MirrorState(ctx context.Context) (*MirrorState, error) {
	cm, err := s.optional(ctx, MirrorStateName)
	if err != nil || cm == nil {
		return nil, err
	}
	var st MirrorState
	if err := json.Unmarshal([]byte(cm.Data["state"]), &st); err != nil {
		return nil, fmt.Errorf("the mirror's state in %s is unreadable: %w", MirrorStateName, err)
	}
	return &st, nil
}
