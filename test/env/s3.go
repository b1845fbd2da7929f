package env

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"
)

// S3 is an S3-compatible server on loopback: versitygw (hack/tools/s3),
// whose posix backend keeps objects in a directory and, with a versioning
// directory, implements bucket versioning and Object Lock (compliance and
// governance retention, legal holds) and conditional writes, which the
// mirror's tests need; its compliance mode refuses a delete even from the
// root user, as S3's does. Chosen over MinIO (AGPL, and its releases are not
// semver module versions to pin) and in-process fakes (gofakes3 has no
// Object Lock).
type S3 struct {
	// Endpoint is the server's URL.
	Endpoint string
	// AccessKey and SecretKey are its root user's credentials, Env the
	// environment that hands them to the tool as the SDK reads them.
	AccessKey, SecretKey string
}

// Env is the environment that gives a process the root user's
// credentials, as AWS_* variables.
func (s *S3) Env() []string {
	return []string{"AWS_ACCESS_KEY_ID=" + s.AccessKey, "AWS_SECRET_ACCESS_KEY=" + s.SecretKey, "AWS_REGION=us-east-1"}
}

// Client is an S3 client as the root user.
func (s *S3) Client() *s3.Client {
	return s3.New(s3.Options{Region: "us-east-1", BaseEndpoint: aws.String(s.Endpoint), UsePathStyle: true,
		Credentials: credentials.NewStaticCredentialsProvider(s.AccessKey, s.SecretKey, "")})
}

// CreateBucket creates bucket name, with Object Lock (and so versioning)
// when locked, else plain.
func (s *S3) CreateBucket(ctx context.Context, name string, locked bool) error {
	_, err := s.Client().CreateBucket(ctx, &s3.CreateBucketInput{Bucket: aws.String(name), ObjectLockEnabledForBucket: aws.Bool(locked)})
	if err != nil {
		return fmt.Errorf("creating bucket %s: %w", name, err)
	}
	if locked {
		_, err = s.Client().PutBucketVersioning(ctx, &s3.PutBucketVersioningInput{Bucket: aws.String(name),
			VersioningConfiguration: &types.VersioningConfiguration{Status: types.BucketVersioningStatusEnabled}})
	}
	return err
}

var s3Once sync.Mutex

// S3 starts the environment's S3 server the first time a test asks for
// it (building it once into the tools cache); it stops with the
// environment.
func (e *Env) S3(ctx context.Context) (*S3, error) {
	s3Once.Lock()
	defer s3Once.Unlock()
	if e.s3 != nil {
		return e.s3, nil
	}
	dir, err := buildTools("s3", "versitygw=github.com/versity/versitygw/cmd/versitygw")
	if err != nil {
		return nil, err
	}
	ports, err := freePorts(1)
	if err != nil {
		return nil, err
	}
	data, versions := filepath.Join(e.Dir, "s3", "data"), filepath.Join(e.Dir, "s3", "versions")
	for _, d := range []string{data, versions} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return nil, err
		}
	}
	secret := make([]byte, 16)
	if _, err := rand.Read(secret); err != nil {
		return nil, err
	}
	s := &S3{AccessKey: "kubectl-gitops-test", SecretKey: hex.EncodeToString(secret)}
	addr := "127.0.0.1:" + strconv.Itoa(ports[0])
	s.Endpoint = "http://" + addr
	// The root credentials go in the environment, not the command line.
	p, err := e.start("versitygw", []string{"ROOT_ACCESS_KEY_ID=" + s.AccessKey, "ROOT_SECRET_ACCESS_KEY=" + s.SecretKey},
		filepath.Join(dir, "versitygw"), "--port", addr, "--region", "us-east-1", "--quiet", "posix", "--versioning-dir", versions, data)
	if err != nil {
		return nil, err
	}
	if err := p.waitFor(ctx, 30*time.Second, tcpReady(addr)); err != nil {
		return nil, err
	}
	e.s3 = s
	return s, nil
}
