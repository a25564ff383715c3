package constgen

import (
	"regexp"
	"strings"
	"testing"
)

const sample = `# comment
// Tag is a tag.
type Tag uint16 DW_TAG_
DW_TAG_a  0x01
// DW_TAG_b has a doc comment.
DW_TAG_b  0x02  // and a line comment
DW_TAG_c  0x02  alias

// A free comment.

DW_TAG_d  0x4109

// Form is a form.
type Form uint16 DW_FORM_
DW_FORM_addr   0x01  2  addr    -     address
DW_FORM_data2  0x05  2  2       -     constant
DW_FORM_ind    0x16  2  indirect -    -
DW_FORM_strx3  0x27  5  3       str_offsets  string
DW_FORM_GNU_x  0x1f01 0 uleb    addr  address
`

func TestGenerate(t *testing.T) {
	out, err := Generate([]byte(sample))
	if err != nil {
		t.Fatal(err)
	}
	space := regexp.MustCompile(`[ \t]+`)
	s := space.ReplaceAllString(string(out), " ")
	for _, want := range []string{
		Header + "\n",
		"// Tag is a tag.\ntype Tag uint16\n",
		"\t// DW_TAG_b has a doc comment.\n\tDW_TAG_b Tag = 0x02 // and a line comment\n",
		"\tDW_TAG_c Tag = 0x02\n\n\t// A free comment.\n\n\tDW_TAG_d Tag = 0x4109\n",
		"\tcase DW_TAG_b:\n\t\treturn \"DW_TAG_b\"\n\tcase DW_TAG_d:",
		`return "DW_TAG_0x" + strconv.FormatUint(uint64(v), 16)`,
		"DW_FORM_data2: {Form: DW_FORM_data2, Name: \"DW_FORM_data2\", Version: 2, Size: SizeFixed, N: 2, Target: TargetNone, Classes: ClassConstant},",
		"DW_FORM_strx3: {Form: DW_FORM_strx3, Name: \"DW_FORM_strx3\", Version: 5, Size: SizeFixed, N: 3, Target: TargetStrOffsets, Classes: ClassString},",
		"DW_FORM_ind:   {Form: DW_FORM_ind, Name: \"DW_FORM_ind\", Version: 2, Size: SizeIndirect, Target: TargetNone, Classes: 0},",
		"DW_FORM_GNU_x - 0x1f01: {",
		"case f >= 0x1f01 && int(f-0x1f01) < len(formRun1):",
	} {
		if want = space.ReplaceAllString(want, " "); !strings.Contains(s, want) {
			t.Errorf("output lacks %q:\n%s", want, s)
		}
	}
	if strings.Contains(s, "case DW_TAG_c:") {
		t.Errorf("alias in String's switch")
	}
}

func TestGenerateErrors(t *testing.T) {
	head := "// T is t.\ntype T uint8 DW_T_\n"
	form := "// Form is f.\ntype Form uint16 DW_FORM_\n"
	for _, c := range []struct{ src, want string }{
		{"DW_T_a 1\n", ":1: constant before any type line"},
		{"type T uint8 DW_T_\nDW_T_a 1\n", ":1: type T has no doc comment"},
		{"// T.\ntype T int DW_T_\n", "is not uint8"},
		{head, "type T has no constants"},
		{head + "DW_X_a 1\n", ":3: \"DW_X_a\" is not an identifier starting with DW_T_"},
		{head + "DW_T_a 2\nDW_T_b 1\n", ":4: DW_T_b = 1 is not above DW_T_a = 2"},
		{head + "DW_T_a 1\nDW_T_a 2\n", "DW_T_a already declared on line 3"},
		{head + "DW_T_a 0x100\n", "overflows uint8"},
		{head + "DW_T_a x\n", "value \"x\""},
		{head + "DW_T_a 1\nDW_T_b 2 alias\n", "no earlier constant has value 2"},
		{head + "DW_T_a 1 extra\n", "unexpected \"extra\""},
		{form + "DW_FORM_a 1 2 addr -\n", "got 3 columns"},
		{form + "DW_FORM_a 1 7 addr - address\n", "version \"7\""},
		{form + "DW_FORM_a 1 2 huge - address\n", "size \"huge\""},
		{form + "DW_FORM_a 1 2 addr there address\n", "target \"there\""},
		{form + "DW_FORM_a 1 2 addr - adress\n", "class \"adress\""},
		{form + "DW_FORM_a 1 2 addr - address,address\n", "class \"address\" twice"},
		{form + "DW_FORM_a 1 2 addr - -\n", "only DW_FORM_indirect"},
	} {
		_, err := Generate([]byte(c.src))
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%q: err %v, want %q", c.src, err, c.want)
		}
	}
}
