package tikv

import (
	"fmt"
	"net"
	"net/url"
	"strings"

	"github.com/stratafs/stratafs/meta"
)

// ParseURL reads a meta store URL of the form
//
//	tikv://pd1:2379,pd2:2379[?prefix=name]
//
// into the addresses of the cluster's placement drivers (PD), each
// host:port, and the key prefix (empty by default) for Open. Anything else
// in the URL is an error rather than ignored, so that a misspelt option
// does not silently share another instance's keys.
func ParseURL(s string) (pdAddrs []string, prefix string, err error) {
	bad := func(why string, args ...any) error {
		return fmt.Errorf("TiKV URL %q: %s (want tikv://host:port[,host:port…][?prefix=name]): %w", s, fmt.Sprintf(why, args...), meta.ErrInvalidArgument)
	}
	// Not url.Parse: it takes the hosts for one, and refuses a list with
	// an IPv6 address in it.
	rest, ok := strings.CutPrefix(s, "tikv://")
	if !ok {
		return nil, "", bad("not a tikv:// URL")
	}
	hosts, query, _ := strings.Cut(rest, "?")
	hosts = strings.TrimSuffix(hosts, "/")
	if strings.ContainsAny(hosts, "/@#") || strings.Contains(query, "#") {
		return nil, "", bad("path, user or fragment given")
	}
	for _, a := range strings.Split(hosts, ",") {
		if host, port, err := net.SplitHostPort(a); err != nil || host == "" || port == "" {
			return nil, "", bad("PD address %q is not host:port", a)
		}
		pdAddrs = append(pdAddrs, a)
	}
	q, err := url.ParseQuery(query)
	if err != nil {
		return nil, "", bad("%v", err)
	}
	for k, vs := range q {
		if k != "prefix" || len(vs) != 1 {
			return nil, "", bad("unknown or repeated option %q", k)
		}
	}
	prefix = q.Get("prefix")
	if err := checkPrefix(prefix); err != nil {
		return nil, "", fmt.Errorf("TiKV URL %q: %w", s, err)
	}
	return pdAddrs, prefix, nil
}
