package infertest

import (
	"bytes"
	"compress/flate"
	"encoding/binary"
	"hash/crc32"
	"image"
	"image/color"
	"image/png"
	"testing"
)

// BombPNG returns a valid w×h 8-bit RGBA PNG of transparent black pixels:
// a decompression bomb of a few hundred KB that decodes to 4×w×h bytes
// (5792×5792: about 260 KB that becomes 134 MB). Making it costs one
// compressed row: its IDAT repeats the deflate blocks of one row h times
// (each ends byte-aligned with a sync flush), and the Adler-32 of all-zero
// data is known.
func BombPNG(tb testing.TB, w, h int) []byte {
	tb.Helper()
	var b bytes.Buffer
	b.WriteString("\x89PNG\r\n\x1a\n")
	ihdr := binary.BigEndian.AppendUint32(nil, uint32(w))
	ihdr = binary.BigEndian.AppendUint32(ihdr, uint32(h))
	ihdr = append(ihdr, 8, 6, 0, 0, 0) // depth 8, RGBA, deflate, no filter, no interlace
	pngChunk(&b, "IHDR", ihdr)
	var row bytes.Buffer
	fw, err := flate.NewWriter(&row, flate.BestCompression)
	if err != nil {
		tb.Fatal(err)
	}
	rowLen := 1 + 4*w // filter byte 0, then the pixels
	if _, err := fw.Write(make([]byte, rowLen)); err != nil {
		tb.Fatal(err)
	}
	if err := fw.Flush(); err != nil {
		tb.Fatal(err)
	}
	idat := []byte{0x78, 0xda} // zlib, best compression
	for range h {
		idat = append(idat, row.Bytes()...)
	}
	idat = append(idat, 0x03, 0x00) // final empty block
	// Adler-32 of n zero bytes: a stays 1, b adds it n times.
	idat = binary.BigEndian.AppendUint32(idat, uint32(int64(rowLen)*int64(h)%65521)<<16|1)
	pngChunk(&b, "IDAT", idat)
	pngChunk(&b, "IEND", nil)
	return b.Bytes()
}

func pngChunk(b *bytes.Buffer, kind string, data []byte) {
	_ = binary.Write(b, binary.BigEndian, uint32(len(data)))
	crc := crc32.NewIEEE()
	crc.Write([]byte(kind))
	crc.Write(data)
	b.WriteString(kind)
	b.Write(data)
	_ = binary.Write(b, binary.BigEndian, crc.Sum32())
}

// PNG returns a w×h RGBA PNG whose pixel at x, y is px(x, y): the small
// real images of the image tests.
func PNG(tb testing.TB, w, h int, px func(x, y int) color.NRGBA) []byte {
	tb.Helper()
	img := image.NewNRGBA(image.Rect(0, 0, w, h))
	for y := range h {
		for x := range w {
			img.SetNRGBA(x, y, px(x, y))
		}
	}
	var buf bytes.Buffer
	if err := png.Encode(&buf, img); err != nil {
		tb.Fatal(err)
	}
	return buf.Bytes()
}
