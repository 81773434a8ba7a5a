package settings

import (
	"errors"
	"testing"
	"time"
)

// FirstSet names a block's first setting given, by its yaml key.
func TestFirstSet(t *testing.T) {
	if k := FirstSet(KafkaGroup{}); k != "" {
		t.Errorf("FirstSet of nothing set = %q", k)
	}
	if k := FirstSet(KafkaGroup{RequestTimeout: time.Second, JoinGroupBackoff: time.Second}); k != "request_timeout" {
		t.Errorf("FirstSet = %q, want request_timeout", k)
	}
	if k := FirstSet(KafkaTopic{Retention: time.Hour}); k != "retention" {
		t.Errorf("FirstSet = %q, want retention", k)
	}
}

// Each block's Validate names the key at fault, as an *Error.
func TestValidateNamesKey(t *testing.T) {
	for _, tc := range []struct {
		err  error
		want string
	}{
		{Conn{ConnectTimeout: -time.Second}.Validate(), "connect_timeout: -1s is outside 0..10m (0: the default, 5s)"},
		{KafkaGroup{HeartbeatInterval: -1}.Validate(), "heartbeat_interval: must not be negative"},
		{KafkaFetch{MinBytes: 2 << 20}.Validate(), "min_bytes: 2097152 exceeds max_bytes 1048576"},
		{JetStreamFetch{FetchWait: time.Millisecond}.Validate(), "fetch_wait: 1ms: at least 1s (a pull request's expiry; a record is delivered as soon as it is there)"},
		{KafkaProduce{RequiredAcks: "two"}.Validate(), `required_acks: "two" is not one of all, one, none`},
		{KafkaTopic{Partitions: 3}.Validate(), "partitions: applies to the topic create: true makes; set create: true, or drop it"},
		{JetStreamPublish{PublishWindow: -1}.Validate(), "publish_window: must not be negative"},
	} {
		var se *Error
		if tc.err == nil || tc.err.Error() != tc.want || !errors.As(tc.err, &se) {
			t.Errorf("got %v, want the *Error %q", tc.err, tc.want)
		}
	}
	for _, ok := range []error{Conn{}.Validate(), KafkaGroup{}.Validate(), KafkaFetch{}.Validate(), JetStreamFetch{}.Validate(),
		KafkaProduce{}.Validate(), KafkaTopic{}.Validate(), JetStreamPublish{}.Validate(), (*SASL)(nil).Validate(), NATSAuth{}.Validate()} {
		if ok != nil {
			t.Errorf("the zero value is refused: %v", ok)
		}
	}
}
