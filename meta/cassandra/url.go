package cassandra

import (
	"fmt"
	"net"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/stratafs/stratafs/meta"
)

// ParseURL reads a meta store URL of the form
//
//	cassandra://host[:port][,host[:port]…]/keyspace[?option=value&…]
//
// with the options shards, consistency, replication, namespace, timeout
// (a Go duration) and discover (true or false: NoDiscovery, which takes
// one host), each as in Options, into the arguments of
// Open. Anything else in the URL is an error rather than ignored, so that
// a misspelt option does not silently change where or how rows go.
func ParseURL(s string) (hosts []string, keyspace string, o Options, err error) {
	bad := func(why string, args ...any) error {
		return fmt.Errorf("cassandra URL %q: %s (want cassandra://host[:port][,…]/keyspace[?shards=N&consistency=…&replication=…&namespace=…&timeout=…&discover=false]): %w",
			s, fmt.Sprintf(why, args...), meta.ErrInvalidArgument)
	}
	// Not url.Parse: it takes the hosts for one, and refuses a list with
	// an IPv6 address in it.
	rest, ok := strings.CutPrefix(s, "cassandra://")
	if !ok {
		return nil, "", o, bad("not a cassandra:// URL")
	}
	rest, query, _ := strings.Cut(rest, "?")
	list, keyspace, _ := strings.Cut(rest, "/")
	if strings.ContainsAny(list, "@#") || strings.ContainsAny(keyspace, "/#") || strings.Contains(query, "#") {
		return nil, "", o, bad("user, fragment or a longer path given")
	}
	if !nameRe.MatchString(keyspace) {
		return nil, "", o, bad("keyspace %q is not 1 to 48 of a-z, 0-9 and _", keyspace)
	}
	for _, h := range strings.Split(list, ",") {
		host, port := h, ""
		if strings.HasPrefix(h, "[") || strings.Count(h, ":") == 1 {
			if host, port, err = net.SplitHostPort(h); err != nil {
				return nil, "", o, bad("host %q: %v", h, err)
			}
		}
		if n, err := strconv.Atoi(port); host == "" || port != "" && (err != nil || n < 1 || n > 65535) {
			return nil, "", o, bad("host %q is not host[:port]", h)
		}
		hosts = append(hosts, h)
	}
	q, err := url.ParseQuery(query)
	if err != nil {
		return nil, "", o, bad("%v", err)
	}
	for k, vs := range q {
		if len(vs) != 1 {
			return nil, "", o, bad("option %q given %d times", k, len(vs))
		}
		v := vs[0]
		switch k {
		case "shards":
			n, err := strconv.ParseUint(v, 10, 32)
			if err != nil || !validShards(uint32(n)) {
				return nil, "", o, bad("shards=%s is not a power of two up to %d", v, MaxShards)
			}
			o.Shards = uint32(n)
		case "consistency":
			o.Consistency = v
		case "replication":
			o.Replication = v
		case "namespace":
			o.Namespace = v
		case "timeout":
			if o.Timeout, err = time.ParseDuration(v); err != nil || o.Timeout <= 0 {
				return nil, "", o, bad("timeout=%s is not a positive duration", v)
			}
		case "discover":
			d, err := strconv.ParseBool(v)
			if err != nil {
				return nil, "", o, bad("discover=%s is not true or false", v)
			}
			o.NoDiscovery = !d
		default:
			return nil, "", o, bad("unknown option %q", k)
		}
	}
	if o.NoDiscovery && len(hosts) != 1 {
		return nil, "", o, bad("discover=false takes one host")
	}
	return hosts, keyspace, o, nil
}
