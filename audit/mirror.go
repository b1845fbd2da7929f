package audit

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/url"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"
	"github.com/aws/smithy-go"
)

// The mirror is the audit log's copy off the cluster, in an S3-compatible
// bucket, ideally write-once (versioning and Object Lock in compliance mode,
// which not even the bucket's owner can shorten): one object per record,
// named by its sequence number, holding the exact bytes the cluster stored
// (the document the hash covers), and the signed checkpoints beside them
// (docs/design.md §10). Nothing here holds or logs a credential: the SDK
// finds them (environment, shared files, web identity) and keeps them.
const (
	mirrorRecords     = "records/"
	mirrorCheckpoints = "checkpoints/"
	// mirrorActorMeta is the object metadata holding the user name the
	// API server stamped on the record (AnnotationActor), which the hash
	// does not cover: restore-log writes it back.
	mirrorActorMeta = "actor"
)

// MirrorLocation is a bucket and a key prefix, from s3://bucket/prefix.
type MirrorLocation struct {
	Bucket, Prefix string
}

// String is the location as a URL.
func (l MirrorLocation) String() string {
	return "s3://" + l.Bucket + "/" + strings.TrimSuffix(l.Prefix, "/")
}

// ParseMirrorURL reads s3://bucket[/prefix].
func ParseMirrorURL(raw string) (MirrorLocation, error) {
	u, err := url.Parse(raw)
	if err != nil || u.Scheme != "s3" || u.Host == "" || u.User != nil || u.RawQuery != "" {
		return MirrorLocation{}, fmt.Errorf("the mirror is not s3://BUCKET/PREFIX (with no credentials in it: the S3 SDK reads them from the environment)")
	}
	prefix := strings.Trim(u.Path, "/")
	if prefix != "" {
		prefix += "/"
	}
	return MirrorLocation{Bucket: u.Host, Prefix: prefix}, nil
}

// MirrorOptions say where the mirror is and how records are locked there.
type MirrorOptions struct {
	Location MirrorLocation
	// Endpoint is the S3 API's URL ("" for AWS itself, from the region).
	Endpoint string
	// Region is the bucket's region ("" for the SDK's: AWS_REGION, the
	// shared config, else us-east-1).
	Region string
	// PathStyle addresses the bucket in the path, as most S3-compatible
	// servers want.
	PathStyle bool
	// Retention locks every record object in compliance mode for this
	// long when the bucket has Object Lock (0: the bucket's default
	// retention, if any).
	Retention time.Duration
}

// Mirror reads and writes the mirror.
type Mirror struct {
	client    *s3.Client
	loc       MirrorLocation
	retention time.Duration
	// locked is whether the bucket has Object Lock (Protection found it).
	locked bool
	// findings are what the last Walk found about the objects themselves
	// (a record rewritten, hidden by a delete marker).
	findings []Break
}

// OpenMirror returns the mirror opts name. Credentials come from the
// SDK's default chain: AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY, the shared
// files, web identity (IRSA, EKS Pod Identity), container and instance roles.
func OpenMirror(ctx context.Context, opts MirrorOptions) (*Mirror, error) {
	var loads []func(*config.LoadOptions) error
	if opts.Region != "" {
		loads = append(loads, config.WithRegion(opts.Region))
	}
	cfg, err := config.LoadDefaultConfig(ctx, loads...)
	if err != nil {
		return nil, fmt.Errorf("configuring the S3 client: %w", err)
	}
	if cfg.Region == "" {
		cfg.Region = "us-east-1"
	}
	client := s3.NewFromConfig(cfg, func(o *s3.Options) {
		if opts.Endpoint != "" {
			o.BaseEndpoint = aws.String(opts.Endpoint)
		}
		o.UsePathStyle = opts.PathStyle
	})
	return &Mirror{client: client, loc: opts.Location, retention: opts.Retention}, nil
}

// Location is where the mirror is.
func (m *Mirror) Location() MirrorLocation { return m.loc }

// MirrorProtection is what keeps the mirror's objects from being changed.
type MirrorProtection struct {
	Versioned  bool `json:"versioned"`
	ObjectLock bool `json:"objectLock"`
	// DefaultRetention is the bucket's default lock ("COMPLIANCE 365d"),
	// "" for none.
	DefaultRetention string `json:"defaultRetention,omitempty"`
}

// WriteOnce is whether nothing can delete or rewrite a locked record.
func (p MirrorProtection) WriteOnce() bool { return p.Versioned && p.ObjectLock }

// Protection reads the bucket's versioning and Object Lock configuration,
// and remembers whether records can be locked.
func (m *Mirror) Protection(ctx context.Context) (MirrorProtection, error) {
	var p MirrorProtection
	v, err := m.client.GetBucketVersioning(ctx, &s3.GetBucketVersioningInput{Bucket: &m.loc.Bucket})
	if err != nil {
		return p, fmt.Errorf("reading the versioning of bucket %s: %w", m.loc.Bucket, describe(err))
	}
	p.Versioned = v.Status == types.BucketVersioningStatusEnabled
	lock, err := m.client.GetObjectLockConfiguration(ctx, &s3.GetObjectLockConfigurationInput{Bucket: &m.loc.Bucket})
	switch {
	case err != nil && !isCode(err, "ObjectLockConfigurationNotFoundError", "ObjectLockConfigurationNotFound"):
		return p, fmt.Errorf("reading the Object Lock configuration of bucket %s: %w", m.loc.Bucket, describe(err))
	case err == nil && lock.ObjectLockConfiguration != nil:
		c := lock.ObjectLockConfiguration
		p.ObjectLock = c.ObjectLockEnabled == types.ObjectLockEnabledEnabled
		if c.Rule != nil && c.Rule.DefaultRetention != nil {
			r := c.Rule.DefaultRetention
			switch {
			case r.Days != nil:
				p.DefaultRetention = fmt.Sprintf("%s %dd", r.Mode, *r.Days)
			case r.Years != nil:
				p.DefaultRetention = fmt.Sprintf("%s %dy", r.Mode, *r.Years)
			}
		}
	}
	m.locked = p.ObjectLock
	return p, nil
}

// RecordKey is the object key of record seq.
func (m *Mirror) RecordKey(seq uint64) string {
	return fmt.Sprintf("%s%s%010d.json", m.loc.Prefix, mirrorRecords, seq)
}

// CheckpointKey is the object key of the checkpoint at record seq.
func (m *Mirror) CheckpointKey(seq uint64) string {
	return fmt.Sprintf("%s%s%010d.json", m.loc.Prefix, mirrorCheckpoints, seq)
}

// ErrMirrorConflict is a mirror object that holds other bytes than the
// ones being written under its name.
var ErrMirrorConflict = errors.New("the mirror already holds other bytes under this name")

// PutRecord writes record seq's stored document doc (and the user name
// the API server stamped on it), locked when the bucket has Object Lock.
// It writes only where no object is (If-None-Match), so a record already
// mirrored by an earlier leader is never written twice: that answers nil
// when the object holds the same bytes, ErrMirrorConflict when not.
func (m *Mirror) PutRecord(ctx context.Context, seq uint64, doc []byte, actor string) error {
	return m.putOnce(ctx, m.RecordKey(seq), doc, map[string]string{mirrorActorMeta: url.QueryEscape(actor)})
}

func (m *Mirror) putOnce(ctx context.Context, key string, body []byte, meta map[string]string) error {
	in := &s3.PutObjectInput{Bucket: &m.loc.Bucket, Key: aws.String(key), Body: bytes.NewReader(body),
		ContentType: aws.String("application/json"), IfNoneMatch: aws.String("*"), Metadata: meta,
		ChecksumAlgorithm: types.ChecksumAlgorithmSha256}
	if m.locked && m.retention > 0 {
		in.ObjectLockMode = types.ObjectLockModeCompliance
		in.ObjectLockRetainUntilDate = aws.Time(time.Now().Add(m.retention).UTC())
	}
	_, err := m.client.PutObject(ctx, in)
	if err == nil {
		return nil
	}
	if !isCode(err, "PreconditionFailed") && !isStatus(err, 412) {
		return fmt.Errorf("writing %s to the mirror: %w", key, describe(err))
	}
	held, _, err := m.get(ctx, key, "")
	if err != nil {
		return err
	}
	if !bytes.Equal(held, body) {
		return fmt.Errorf("%s: %w", key, ErrMirrorConflict)
	}
	return nil
}

// get reads key (at version, "" for the newest) and its metadata.
func (m *Mirror) get(ctx context.Context, key, version string) ([]byte, map[string]string, error) {
	in := &s3.GetObjectInput{Bucket: &m.loc.Bucket, Key: aws.String(key)}
	if version != "" {
		in.VersionId = aws.String(version)
	}
	out, err := m.client.GetObject(ctx, in)
	if err != nil {
		return nil, nil, fmt.Errorf("reading %s from the mirror: %w", key, describe(err))
	}
	defer out.Body.Close()
	body, err := io.ReadAll(out.Body)
	if err != nil {
		return nil, nil, fmt.Errorf("reading %s from the mirror: %w", key, err)
	}
	return body, out.Metadata, nil
}

// holds is whether the mirror has record seq.
func (m *Mirror) holds(ctx context.Context, seq uint64) (bool, error) {
	return m.exists(ctx, m.RecordKey(seq))
}

// exists is whether the mirror has an object named key.
func (m *Mirror) exists(ctx context.Context, key string) (bool, error) {
	_, err := m.client.HeadObject(ctx, &s3.HeadObjectInput{Bucket: &m.loc.Bucket, Key: aws.String(key)})
	switch {
	case err == nil:
		return true, nil
	case isCode(err, "NotFound", "NoSuchKey") || isStatus(err, 404):
		return false, nil
	}
	return false, fmt.Errorf("reading %s in the mirror: %w", key, describe(err))
}

// Newest is the sequence number of the newest record the mirror holds,
// found as the cluster log's end is (docs/design.md §6): steps that double
// from from (a record known to be there, 0 for none) until one is missing,
// then halving. Records are mirrored in order, so the mirror holds every
// record up to it; verify names any gap.
func (m *Mirror) Newest(ctx context.Context, from uint64) (uint64, error) {
	if from > 0 {
		ok, err := m.holds(ctx, from)
		if err != nil {
			return 0, err
		}
		if !ok {
			from = 0
		}
	}
	held, missing := from, uint64(0)
	for step := uint64(1); missing == 0; step *= 2 {
		ok, err := m.holds(ctx, held+step)
		if err != nil {
			return 0, err
		}
		if !ok {
			missing = held + step
			break
		}
		held += step
	}
	return halve(held, missing, func(seq uint64) (bool, error) { return m.holds(ctx, seq) })
}

// The kinds of break only a mirror shows.
const (
	// BreakMirrorRewritten is a record object with more than one version:
	// written again after it was first mirrored.
	BreakMirrorRewritten BreakKind = "mirror-rewritten"
	// BreakMirrorDeleted is a record object whose newest version is a
	// delete marker: deleted, and still readable by its first version.
	BreakMirrorDeleted BreakKind = "mirror-deleted"
)

// objectVersions are the versions of one key, oldest first.
type objectVersions struct {
	key      string
	versions []types.ObjectVersion
	deleted  bool
}

// walkVersions hands each key under prefix to fn with its versions, in
// key order. A bucket that keeps no versions lists each object once,
// with the version id "null".
func (m *Mirror) walkVersions(ctx context.Context, prefix string, fn func(objectVersions) error) error {
	in := &s3.ListObjectVersionsInput{Bucket: &m.loc.Bucket, Prefix: aws.String(prefix)}
	var cur *objectVersions
	flush := func() error {
		if cur == nil {
			return nil
		}
		sort.SliceStable(cur.versions, func(i, j int) bool {
			return aws.ToTime(cur.versions[i].LastModified).Before(aws.ToTime(cur.versions[j].LastModified))
		})
		done := *cur
		cur = nil
		if len(done.versions) == 0 {
			return nil // only delete markers: nothing to read
		}
		return fn(done)
	}
	deleted := map[string]bool{}
	for {
		out, err := m.client.ListObjectVersions(ctx, in)
		if err != nil {
			return fmt.Errorf("listing %s in the mirror: %w", m.loc, describe(err))
		}
		for _, d := range out.DeleteMarkers {
			if aws.ToBool(d.IsLatest) {
				deleted[aws.ToString(d.Key)] = true
			}
		}
		for _, v := range out.Versions {
			key := aws.ToString(v.Key)
			if cur != nil && cur.key != key {
				if err := flush(); err != nil {
					return err
				}
			}
			if cur == nil {
				cur = &objectVersions{key: key}
			}
			cur.versions = append(cur.versions, v)
			cur.deleted = cur.deleted || deleted[key]
		}
		if !aws.ToBool(out.IsTruncated) {
			break
		}
		in.KeyMarker, in.VersionIdMarker = out.NextKeyMarker, out.NextVersionIdMarker
	}
	if cur != nil {
		cur.deleted = cur.deleted || deleted[cur.key]
	}
	return flush()
}

// Walk implements Store: every record object in key order (which is
// sequence order), each read at its first version, pinned by version id,
// so an object written again or hidden by a delete marker still shows
// what was first mirrored; Findings then name it.
func (m *Mirror) Walk(ctx context.Context, _ Filter, fn func(Entry) error) error {
	m.findings = nil
	return m.walkVersions(ctx, m.loc.Prefix+mirrorRecords, func(o objectVersions) error {
		name := strings.TrimPrefix(o.key, m.loc.Prefix)
		seq, ok := strings.CutSuffix(strings.TrimPrefix(name, mirrorRecords), ".json")
		slot, err := strconv.ParseUint(seq, 10, 64)
		if !ok || err != nil || len(seq) != 10 {
			slot = 0
		}
		if len(o.versions) > 1 {
			m.findings = append(m.findings, Break{Kind: BreakMirrorRewritten, Seq: slot, Name: o.key,
				Detail: fmt.Sprintf("the mirror holds %d versions of this record: it was written again after it was mirrored; the first is the one read", len(o.versions))})
		}
		if o.deleted {
			m.findings = append(m.findings, Break{Kind: BreakMirrorDeleted, Seq: slot, Name: o.key,
				Detail: "a delete marker hides this record: it was deleted from the mirror (the bucket kept its versions)"})
		}
		doc, meta, err := m.get(ctx, o.key, aws.ToString(o.versions[0].VersionId))
		if err != nil {
			return err
		}
		actor, _ := url.QueryUnescape(meta[mirrorActorMeta])
		return fn(Entry{Slot: slot, Name: o.key, Doc: doc, Actor: actor})
	})
}

// Findings are what the last Walk found about the objects themselves.
func (m *Mirror) Findings() []Break { return m.findings }

// Entries implements Store.
func (m *Mirror) Entries(ctx context.Context, filter Filter) ([]Entry, error) {
	return collect(ctx, m.Walk, filter)
}

// Head implements Store: the mirror has none (its newest object is).
func (m *Mirror) Head(context.Context) (*HeadState, error) { return nil, nil }

// ErrMirrorReadOnly is an append to the mirror, which only the controller
// writes, copying the cluster's records.
var ErrMirrorReadOnly = errors.New("the mirror is read-only here: the controller copies records to it")

// Append implements Store: the mirror is never appended to directly.
func (m *Mirror) Append(context.Context, *Record) error { return ErrMirrorReadOnly }

// isCode is whether err is an S3 error with one of codes.
func isCode(err error, codes ...string) bool {
	var api smithy.APIError
	if !errors.As(err, &api) {
		return false
	}
	for _, c := range codes {
		if api.ErrorCode() == c {
			return true
		}
	}
	return false
}

// isStatus is whether err is an HTTP response with status code.
func isStatus(err error, code int) bool {
	var re interface{ HTTPStatusCode() int }
	return errors.As(err, &re) && re.HTTPStatusCode() == code
}

// describe shortens an S3 error to its code and message: the SDK's own
// text carries request ids and the operation, never a credential.
func describe(err error) error {
	var api smithy.APIError
	if errors.As(err, &api) {
		return fmt.Errorf("%s: %s", api.ErrorCode(), api.ErrorMessage())
	}
	return err
}

// ErrNotHeldUnderLock is a mirror object that is not what the cluster
// holds, or not locked in compliance mode past now: what pruning must
// never rely on.
var ErrNotHeldUnderLock = errors.New("the mirror does not hold it under lock")

// HeldUnderLock reads key back and says whether it holds body, locked in
// compliance mode until after now: the proof a record or checkpoint may
// leave the cluster.
func (m *Mirror) HeldUnderLock(ctx context.Context, key string, body []byte, now time.Time) error {
	out, err := m.client.GetObject(ctx, &s3.GetObjectInput{Bucket: &m.loc.Bucket, Key: aws.String(key)})
	if err != nil {
		return fmt.Errorf("reading %s back from the mirror: %w", key, describe(err))
	}
	defer out.Body.Close()
	held, err := io.ReadAll(out.Body)
	switch {
	case err != nil:
		return fmt.Errorf("reading %s back from the mirror: %w", key, err)
	case !bytes.Equal(held, body):
		return fmt.Errorf("%s holds other bytes than the cluster: %w", key, ErrNotHeldUnderLock)
	}
	// The lock of the version read, asked for by name: GetObject's lock
	// headers are not sent by every server, nor to every caller.
	lock, err := m.client.GetObjectRetention(ctx, &s3.GetObjectRetentionInput{Bucket: &m.loc.Bucket, Key: aws.String(key), VersionId: out.VersionId})
	switch {
	case err != nil && (isCode(err, "NoSuchObjectLockConfiguration", "ObjectLockConfigurationNotFoundError") || isStatus(err, 404)):
		return fmt.Errorf("%s has no lock: %w", key, ErrNotHeldUnderLock)
	case err != nil:
		return fmt.Errorf("reading the lock of %s in the mirror: %w", key, describe(err))
	case lock.Retention == nil || lock.Retention.Mode != types.ObjectLockRetentionModeCompliance:
		return fmt.Errorf("%s has no compliance-mode lock: %w", key, ErrNotHeldUnderLock)
	case !aws.ToTime(lock.Retention.RetainUntilDate).After(now):
		return fmt.Errorf("%s is locked only until %s: %w", key, aws.ToTime(lock.Retention.RetainUntilDate).Format(time.RFC3339), ErrNotHeldUnderLock)
	}
	return nil
}

// Checkpoint reads the checkpoint the mirror holds at record seq, nil
// when it holds none.
func (m *Mirror) Checkpoint(ctx context.Context, seq uint64) (*SignedCheckpoint, error) {
	ok, err := m.exists(ctx, m.CheckpointKey(seq))
	if err != nil || !ok {
		return nil, err
	}
	body, _, err := m.get(ctx, m.CheckpointKey(seq), "")
	if err != nil {
		return nil, err
	}
	var cp SignedCheckpoint
	if err := json.Unmarshal(body, &cp); err != nil {
		return nil, fmt.Errorf("checkpoint %d in the mirror is unreadable: %w", seq, err)
	}
	return &cp, nil
}

// CheckpointBody is the object the mirror holds for cp.
func CheckpointBody(cp SignedCheckpoint) ([]byte, error) { return json.Marshal(cp) }
