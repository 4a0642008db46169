package s3

import (
	"errors"
	"testing"
)

// The XML request bodies: whatever a client sends must decode or fail
// with MalformedXML, never panic.

func FuzzDeleteRequest(f *testing.F) {
	f.Add([]byte(`<Delete><Quiet>true</Quiet><Object><Key>a</Key><VersionId>null</VersionId></Object></Delete>`))
	f.Add([]byte(`<Delete xmlns="http://s3.amazonaws.com/doc/2006-03-01/"><Object><Key>&lt;</Key></Object></Delete>`))
	f.Add([]byte(`<Delete><Quiet>maybe</Quiet></Delete>`))
	f.Fuzz(func(t *testing.T, b []byte) {
		var req deleteRequest
		if err := decodeXML(b, &req); err != nil && err != errMalformedXML {
			t.Fatalf("error %v", err)
		}
	})
}

func FuzzVersioningConfiguration(f *testing.F) {
	f.Add([]byte(`<VersioningConfiguration><Status>Enabled</Status><MfaDelete>Disabled</MfaDelete></VersioningConfiguration>`))
	f.Add([]byte(`<VersioningConfiguration/>`))
	f.Fuzz(func(t *testing.T, b []byte) {
		var cfg versioningConfiguration
		if err := decodeXML(b, &cfg); err != nil && err != errMalformedXML {
			t.Fatalf("error %v", err)
		}
	})
}

func FuzzCreateBucketConfiguration(f *testing.F) {
	f.Add([]byte(`<CreateBucketConfiguration><LocationConstraint>us-east-1</LocationConstraint></CreateBucketConfiguration>`))
	f.Fuzz(func(t *testing.T, b []byte) {
		var cfg createBucketConfiguration
		if err := decodeXML(b, &cfg); err != nil && err != errMalformedXML {
			t.Fatalf("error %v", err)
		}
	})
}

func FuzzCompleteRequest(f *testing.F) {
	f.Add([]byte(`<CompleteMultipartUpload><Part><PartNumber>1</PartNumber><ETag>"a54357aff0632cce46d942af68356b38"</ETag>` +
		`<ChecksumCRC32>AAAAAA==</ChecksumCRC32></Part></CompleteMultipartUpload>`))
	f.Add([]byte(`<CompleteMultipartUpload><Part><PartNumber>x</PartNumber></Part></CompleteMultipartUpload><!-- c -->`))
	f.Add([]byte(`<CompleteMultipartUpload/><Part/>`))
	f.Fuzz(func(t *testing.T, b []byte) {
		var req completeRequest
		if err := decodeXML(b, &req); err != nil && err != errMalformedXML {
			t.Fatalf("error %v", err)
		}
	})
}

func FuzzLifecycleConfiguration(f *testing.F) {
	f.Add([]byte(`<LifecycleConfiguration><Rule><ID>r</ID><Filter><And><Prefix>a/</Prefix></And></Filter><Status>Enabled</Status>` +
		`<Expiration><Days>3</Days></Expiration><NoncurrentVersionExpiration><NoncurrentDays>1</NoncurrentDays></NoncurrentVersionExpiration>` +
		`</Rule></LifecycleConfiguration>`))
	f.Add([]byte(`<LifecycleConfiguration><Rule><Prefix/><Status>Disabled</Status><Transition/></Rule></LifecycleConfiguration>`))
	f.Fuzz(func(t *testing.T, b []byte) {
		var cfg lifecycleConfiguration
		if err := decodeXML(b, &cfg); err != nil {
			if err != errMalformedXML {
				t.Fatalf("error %v", err)
			}
			return
		}
		// Converting never panics, and fails only with an S3 error.
		if _, err := cfg.rules(); err != nil {
			var e *Error
			if !errors.As(err, &e) {
				t.Fatalf("error %v", err)
			}
		}
	})
}
