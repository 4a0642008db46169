package s3

import (
	"encoding/xml"
	"errors"
	"reflect"
	"strings"
	"testing"

	"github.com/stratafs/stratafs/meta"
)

func TestLifecycleRules(t *testing.T) {
	doc := func(rules ...string) string {
		return `<LifecycleConfiguration xmlns="` + xmlns + `">` + strings.Join(rules, "") + `</LifecycleConfiguration>`
	}
	rule := func(body string) string { return "<Rule><ID>r</ID><Status>Enabled</Status>" + body + "</Rule>" }
	filter := "<Filter><Prefix>logs/</Prefix></Filter>"
	days := "<Expiration><Days>3</Days></Expiration>"
	tests := []struct {
		name string
		body string
		want []meta.LifecycleRule // when code is empty
		code string
	}{
		{"every action", doc(rule(filter + days +
			"<NoncurrentVersionExpiration><NoncurrentDays>5</NoncurrentDays><NewerNoncurrentVersions>2</NewerNoncurrentVersions></NoncurrentVersionExpiration>" +
			"<AbortIncompleteMultipartUpload><DaysAfterInitiation>7</DaysAfterInitiation></AbortIncompleteMultipartUpload>")),
			[]meta.LifecycleRule{{ID: "r", Prefix: "logs/", Enabled: true, ExpirationDays: 3, NoncurrentDays: 5,
				NewerNoncurrentVersions: 2, AbortIncompleteUploadDays: 7}}, ""},
		{"legacy prefix, disabled, marker", doc("<Rule><ID>m</ID><Prefix>a</Prefix><Status>Disabled</Status>" +
			"<Expiration><ExpiredObjectDeleteMarker>true</ExpiredObjectDeleteMarker></Expiration></Rule>"),
			[]meta.LifecycleRule{{ID: "m", Prefix: "a", ExpiredObjectDeleteMarker: true}}, ""},
		{"And prefix, empty filter", doc(rule("<Filter><And><Prefix>x/</Prefix></And></Filter>"+days),
			"<Rule><ID>all</ID><Filter/><Status>Enabled</Status>"+days+"</Rule>"),
			[]meta.LifecycleRule{{ID: "r", Prefix: "x/", Enabled: true, ExpirationDays: 3},
				{ID: "all", Enabled: true, ExpirationDays: 3}}, ""},

		{"no rules", doc(), nil, "MalformedXML"},
		{"bad status", doc("<Rule><ID>r</ID><Status>On</Status>" + filter + days + "</Rule>"), nil, "MalformedXML"},
		{"no filter", doc(rule(days)), nil, "MalformedXML"},
		{"filter and prefix", doc(rule(filter + "<Prefix>a</Prefix>" + days)), nil, "MalformedXML"},
		{"filter prefix and And", doc(rule("<Filter><Prefix>a</Prefix><And><Prefix>b</Prefix></And></Filter>" + days)), nil, "MalformedXML"},
		{"days and marker", doc(rule(filter + "<Expiration><Days>1</Days><ExpiredObjectDeleteMarker>true</ExpiredObjectDeleteMarker></Expiration>")), nil, "MalformedXML"},
		{"date and days", doc(rule(filter + "<Expiration><Days>1</Days><Date>2030-01-01T00:00:00Z</Date></Expiration>")), nil, "MalformedXML"},
		{"empty expiration", doc(rule(filter + "<Expiration/>")), nil, "MalformedXML"},
		{"noncurrent without days", doc(rule(filter + "<NoncurrentVersionExpiration><NewerNoncurrentVersions>1</NewerNoncurrentVersions></NoncurrentVersionExpiration>")), nil, "MalformedXML"},
		{"unknown action", doc(rule(filter + "<Archive><Days>1</Days></Archive>")), nil, "MalformedXML"},
		{"unknown element in an action", doc(rule(filter + "<Expiration><Days>1</Days><Hours>2</Hours></Expiration>")), nil, "MalformedXML"},
		{"days not a number", doc(rule(filter + "<Expiration><Days>soon</Days></Expiration>")), nil, "MalformedXML"},
		{"wrong root", `<Lifecycle><Rule/></Lifecycle>`, nil, "MalformedXML"},

		{"date", doc(rule(filter + "<Expiration><Date>2030-01-01T00:00:00Z</Date></Expiration>")), nil, "NotImplemented"},
		{"transition", doc(rule(filter + "<Transition><Days>30</Days><StorageClass>GLACIER</StorageClass></Transition>")), nil, "NotImplemented"},
		{"noncurrent transition", doc(rule(filter + days + "<NoncurrentVersionTransition><NoncurrentDays>1</NoncurrentDays></NoncurrentVersionTransition>")), nil, "NotImplemented"},
		{"tag filter", doc(rule("<Filter><Tag><Key>k</Key><Value>v</Value></Tag></Filter>" + days)), nil, "NotImplemented"},
		{"tag in And", doc(rule("<Filter><And><Prefix>a</Prefix><Tag><Key>k</Key><Value>v</Value></Tag></And></Filter>" + days)), nil, "NotImplemented"},
		{"size filter", doc(rule("<Filter><ObjectSizeGreaterThan>10</ObjectSizeGreaterThan></Filter>" + days)), nil, "NotImplemented"},

		{"zero days", doc(rule(filter + "<Expiration><Days>0</Days></Expiration>")), nil, "InvalidArgument"},
		{"negative noncurrent days", doc(rule(filter + "<NoncurrentVersionExpiration><NoncurrentDays>-1</NoncurrentDays></NoncurrentVersionExpiration>")), nil, "InvalidArgument"},
		{"zero newer versions", doc(rule(filter + "<NoncurrentVersionExpiration><NoncurrentDays>1</NoncurrentDays><NewerNoncurrentVersions>0</NewerNoncurrentVersions></NoncurrentVersionExpiration>")), nil, "InvalidArgument"},
		{"zero abort days", doc(rule(filter + "<AbortIncompleteMultipartUpload><DaysAfterInitiation>0</DaysAfterInitiation></AbortIncompleteMultipartUpload>")), nil, "InvalidArgument"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var cfg lifecycleConfiguration
			err := decodeXML([]byte(tt.body), &cfg)
			var rules []meta.LifecycleRule
			if err == nil {
				rules, err = cfg.rules()
			}
			if tt.code != "" {
				var e *Error
				if !errors.As(err, &e) || e.Code != tt.code {
					t.Fatalf("got %v, %v; want %s", rules, err, tt.code)
				}
				return
			}
			if err != nil || !reflect.DeepEqual(rules, tt.want) {
				t.Fatalf("got %+v, %v; want %+v", rules, err, tt.want)
			}
		})
	}
}

// TestLifecycleRuleXML renders stored rules and reads them back.
func TestLifecycleRuleXML(t *testing.T) {
	rules := []meta.LifecycleRule{
		{ID: "a", Prefix: "logs/", Enabled: true, ExpirationDays: 3, NoncurrentDays: 5, NewerNoncurrentVersions: 2, AbortIncompleteUploadDays: 7},
		{ID: "b", ExpiredObjectDeleteMarker: true, NoncurrentDays: 1},
	}
	doc := lifecycleConfiguration{Xmlns: xmlns}
	for _, r := range rules {
		doc.Rules = append(doc.Rules, ruleXML(r))
	}
	b, err := xml.Marshal(doc)
	if err != nil {
		t.Fatal(err)
	}
	var back lifecycleConfiguration
	if err := decodeXML(b, &back); err != nil {
		t.Fatalf("%s: %v", b, err)
	}
	got, err := back.rules()
	if err != nil || !reflect.DeepEqual(got, rules) {
		t.Fatalf("%s read back as %+v, %v", b, got, err)
	}
}
