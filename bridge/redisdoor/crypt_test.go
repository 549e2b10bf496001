package redisdoor_test

import (
	"bytes"
	"encoding/base64"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/ipc"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/cluster-serving/cluster-serving/bridge/redisdoor/redistest"
	"github.com/cluster-serving/cluster-serving/infer"
	"github.com/cluster-serving/cluster-serving/infer/infertest"
	"github.com/cluster-serving/cluster-serving/mesh/meshtest"
)

// imageRecord is the Arrow payload the original's Python client enqueues
// for {"x": {"b64": img}}: one utf8 column holding img, base64 of the
// stream.
func imageRecord(tb testing.TB, img string) string {
	tb.Helper()
	b := array.NewStringBuilder(memory.DefaultAllocator)
	defer b.Release()
	b.Append(img)
	col := b.NewArray()
	defer col.Release()
	schema := arrow.NewSchema([]arrow.Field{{Name: "x", Type: arrow.BinaryTypes.String, Nullable: true}}, nil)
	rec := array.NewRecordBatch(schema, []arrow.Array{col}, 1)
	defer rec.Release()
	var buf bytes.Buffer
	w := ipc.NewWriter(&buf, ipc.WithSchema(schema))
	if err := w.Write(rec); err != nil {
		tb.Fatal(err)
	}
	if err := w.Close(); err != nil {
		tb.Fatal(err)
	}
	return base64.StdEncoding.EncodeToString(buf.Bytes())
}

// TestEncryptedRecordsThroughTheDoor runs recordEncrypted end to end: an
// image encrypted as the original's Python side did (gen_encrypted.py) is
// answered as the plain image is on a plain job; one encrypted with another
// secret answers NaN, and the record after it is still answered.
func TestEncryptedRecordsThroughTheDoor(t *testing.T) {
	const secret, salt = "door-secret-1e7", "door-salt-4b2"
	addr, rdb := redistest.Start(t)
	s := meshtest.StartServer(t)
	model := infertest.Model("image_mean")
	jpg := infertest.Fixture(t, "images/cat1.jpeg") // the original's quick-start image
	key, err := infer.DeriveKey(secret, salt)
	if err != nil {
		t.Fatal(err)
	}
	cfg := infer.Config{ModelPath: model, Threads: 1, ImageResize: [2]int{224, 224}}
	plainJob := startJobWith(t, s, "plainimg", cfg)
	runDoor(t, addr, "plainimg", plainJob.client)
	cfg.RecordKey = key
	encJob := startJobWith(t, s, "encimg", cfg)
	runDoor(t, addr, "encimg", encJob.client)

	enqueue(t, rdb, "plainimg", "plain", imageRecord(t, base64.StdEncoding.EncodeToString(jpg)), false)
	want := query(t, rdb, "plainimg", "plain")
	if want == "NaN" {
		t.Fatal("the plain image answered NaN")
	}
	enc := infertest.EncryptLikeOriginal(t, "record", secret, salt, jpg)
	wrong := infertest.EncryptLikeOriginal(t, "record", "another-secret", salt, jpg)
	enqueue(t, rdb, "encimg", "wrong-key", imageRecord(t, wrong), false)
	enqueue(t, rdb, "encimg", "not-encrypted", imageRecord(t, base64.StdEncoding.EncodeToString(jpg)), false)
	enqueue(t, rdb, "encimg", "encrypted", imageRecord(t, enc), false)
	for uri, w := range map[string]string{"wrong-key": "NaN", "not-encrypted": "NaN", "encrypted": want} {
		if got := query(t, rdb, "encimg", uri); got != w {
			t.Errorf("%s: got %.40q, want %.40q", uri, got, w)
		}
	}
}
