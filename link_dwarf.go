package elfimage

import (
	"encoding/binary"
	"fmt"
	"runtime"
	"strings"

	"github.com/elfimage/elfimage/dwarf"
	"github.com/elfimage/elfimage/dwarf/expr"
	"github.com/elfimage/elfimage/dwarf/info"
	"github.com/elfimage/elfimage/dwarf/line"
	"github.com/elfimage/elfimage/dwarf/loc"
	"github.com/elfimage/elfimage/dwarf/value"
	"github.com/elfimage/elfimage/meta"
)

// buildDWARF builds the debug sections of the module: one compile unit
// with a subprogram per procedure and its formal parameters, a base type
// for the language's integers, and a line program with one sequence per
// procedure. It returns the sections in the order they are laid out.
func (l *linker) buildDWARF() ([]builtSection, error) {
	m := l.m
	str := newDebugStr()
	l.str = str
	// .debug_str holds at least each procedure's name and docstring.
	strBytes := 0
	for _, p := range m.Procs {
		strBytes += len(p.Name) + 1 + len(p.Doc) + 1
	}
	str.Grow(len(m.Procs)+len(m.Procs)/4+16, strBytes+256)
	file := m.File
	if file == "" {
		file = "<unknown>"
	}

	// The line program and the procedure table share nothing with
	// .debug_info: on a large module they are built on another core.
	var lr lineResult
	var lineErr, tableErr error
	var table []byte
	lineAndTable := func() {
		if lr, lineErr = l.buildLine(file); lineErr == nil && !l.object {
			table, tableErr = l.buildProcTable(&lr)
		}
	}
	done := make(chan struct{})
	if len(m.Procs) >= parallelProcs && runtime.GOMAXPROCS(0) > 1 {
		go func() { lineAndTable(); close(done) }()
	} else {
		lineAndTable()
		close(done)
	}
	ir, infoErr := l.buildInfo(file, str)
	<-done
	// Errors in the order of the steps when they ran one after another.
	switch {
	case lineErr != nil:
		return nil, lineErr
	case infoErr != nil:
		return nil, infoErr
	}
	debugLine, seqOffsets, lineStrOffsets, lineStr := lr.data, lr.seqOffsets, lr.strOffsets, lr.lineStr
	debugInfo, debugAbbrev, infoFields, unitOffset, lists := ir.data, ir.abbrev, ir.fields, ir.unitOffset, ir.lists
	infoAddrs := infoFields.Addrs
	var err error

	// .debug_aranges: the unit's code, for consumers that find units by
	// address (DWARF 5 section 6.1.2).
	aranges, err := loc.EncodeAranges(l.enc, unitOffset, []loc.Range{{Start: l.textStart, End: l.textEnd}})
	if err != nil {
		return nil, &LinkError{"module", fmt.Sprintf(".debug_aranges: %v", err)}
	}
	// The absolute addresses of each section, for Rebase: DW_FORM_addr
	// values, the operand of each sequence's DW_LNE_set_address (opcode
	// 0, length 1+AddrSize in one LEB128 byte, DW_LNE_set_address), the
	// tuple's address in .debug_aranges (after the header, padded to twice
	// the address size), and list entries (see debugLists.sections).
	lineAddrs := make([]uint64, len(seqOffsets))
	for i, off := range seqOffsets {
		lineAddrs[i] = off + 3
	}
	arangesHdr := 2 + 2*l.enc.Format.OffsetSize() + 2
	if l.enc.Format == dwarf.Format64 {
		arangesHdr += 4
	}
	tuple := 2 * int(l.enc.AddrSize)
	arangesAddrs := []uint64{uint64((arangesHdr + tuple - 1) / tuple * tuple)}
	withAddrs := func(s builtSection, addrs []uint64, offs []info.OffsetField) builtSection {
		s.addrs, s.offsets = addrs, offs
		return s
	}
	osz := l.enc.Format.OffsetSize()
	arangesInfo := uint64(4 + 2) // unit_length, version, then debug_info_offset
	if l.enc.Format == dwarf.Format64 {
		arangesInfo += 8
	}
	lineOffs := make([]info.OffsetField, len(lineStrOffsets))
	for i, off := range lineStrOffsets {
		lineOffs[i] = info.OffsetField{At: off, Size: osz, Section: ".debug_line_str"}
	}
	lineSecs := []builtSection{withAddrs(debugSection(".debug_line", debugLine, false), lineAddrs, lineOffs)}
	if l.enc.Version >= 5 {
		lineSecs = append(lineSecs, debugSection(".debug_line_str", lineStr.Bytes(), true))
	}
	secs := []builtSection{
		debugSection(".debug_abbrev", debugAbbrev, false),
		withAddrs(debugSection(".debug_info", debugInfo, false), infoAddrs, infoFields.Offsets),
		withAddrs(debugSection(".debug_aranges", aranges, false), arangesAddrs,
			[]info.OffsetField{{At: arangesInfo, Size: osz, Section: ".debug_info"}}),
	}
	if l.object {
		// The procedure table holds final addresses and .debug_line
		// offsets, which only the system linker knows.
		secs = append(secs, lineSecs[0], debugSection(".debug_str", str.Bytes(), true))
		secs = append(secs, lineSecs[1:]...)
		return lists.appendSections(secs), nil
	}
	if tableErr != nil {
		return nil, tableErr
	}
	// What a first PositionAt reads (the procedure table's records, the
	// line program's header and file names, one sequence) is placed
	// together at the end of the file: .debug_line, .debug_line_str and
	// the procedure table, in that order, after the other DWARF.
	secs = append(secs, debugSection(".debug_str", str.Bytes(), true))
	secs = lists.appendSections(secs)
	secs = append(secs, lineSecs...)
	secs = append(secs, debugSection(meta.SectionProcs, table, false))
	return secs, nil
}

// lineResult is the line program of a link (.debug_line and its
// strings) and where each procedure's sequence starts.
type lineResult struct {
	data       []byte
	lineStr    *dwarf.StrTab
	seqOffsets []uint64 // of each sequence
	strOffsets []uint64 // .debug_line fields holding .debug_line_str offsets
	seqOf      []int    // each procedure's sequence, -1 for none
	// filePath is the path PositionAt gives for the rows' file (entry
	// fileIndex), as the line program's header resolves it; hasPath is
	// false when the header could not be read back (no position index
	// is written then).
	filePath string
	hasPath  bool
}

// buildLine builds .debug_line: one sequence per procedure with rows.
func (l *linker) buildLine(file string) (r lineResult, err0 error) {
	m := l.m
	r.lineStr = dwarf.NewStrTab()
	// .debug_line: file entries 0 and 1 both name the primary source
	// file, so DWARF 5 consumers (0-based) and older ones (1-based) agree.
	prog := &line.Program{Enc: l.enc, CompDir: m.CompDir}
	prog.Files = []line.File{{Name: file}, {Name: file}}
	r.seqOf = make([]int, len(m.Procs)) // index into prog.Sequences, -1 for none
	nRows, nSeqs := 0, 0
	for _, p := range m.Procs {
		nRows += len(p.Lines)
		if len(p.Lines) > 0 {
			nSeqs++
		}
	}
	// Every sequence's rows, in one array, from the last link's when it
	// is large enough (rowsScratch).
	var rows []line.Row
	if pr, ok := rowsScratch.get(); ok && cap(pr) >= nRows {
		rows = pr[:0]
	} else {
		rows = make([]line.Row, 0, nRows)
	}
	defer func() {
		rowsScratch.put(rows[:0])
	}()
	prog.Sequences = make([]line.Sequence, 0, nSeqs)
	for i, p := range m.Procs {
		start := l.procAddr[i]
		seq := line.Sequence{Start: start, End: start + uint64(len(p.Code)), Rows: rows[len(rows) : len(rows) : len(rows)+len(p.Lines)]}
		rows = rows[:len(rows)+len(p.Lines)]
		for j, row := range p.Lines {
			if row.Offset >= uint32(len(p.Code)) {
				return r, &LinkError{"proc " + p.Name, fmt.Sprintf("line row %d at offset %#x is past the end of the code (%#x bytes)", j, row.Offset, len(p.Code))}
			}
			if j > 0 && row.Offset < p.Lines[j-1].Offset {
				return r, &LinkError{"proc " + p.Name, fmt.Sprintf("line row %d at offset %#x goes backwards", j, row.Offset)}
			}
			seq.Rows = append(seq.Rows, line.Row{Address: start + uint64(row.Offset), File: fileIndex,
				Line: row.Line, Column: row.Column, IsStmt: row.IsStmt, PrologueEnd: row.PrologueEnd})
		}
		r.seqOf[i] = -1
		if len(seq.Rows) > 0 { // a procedure without rows gets no (empty) sequence
			r.seqOf[i] = len(prog.Sequences)
			prog.Sequences = append(prog.Sequences, seq)
		}
	}
	var err error
	r.data, r.seqOffsets, r.strOffsets, err = prog.EncodeStrOffsets(r.lineStr)
	if err != nil {
		return r, &LinkError{"module", fmt.Sprintf(".debug_line: %v", err)}
	}
	// The file name as a query resolves it from the header (directory
	// joined, cleaned), for the procedure table's position index: the
	// very code of the DWARF path, so that both give the same string.
	// Before DWARF 5 the directory is the unit's DW_AT_comp_dir.
	compDir := ""
	if l.enc.Version < 5 {
		compDir = m.CompDir
	}
	var hr line.Reader
	sec := line.Sections{Order: binary.LittleEndian, Line: r.data, LineStr: r.lineStr.Bytes()}
	if hr.InitSequence(sec, 0, compDir) == nil {
		r.filePath, r.hasPath = hr.FilePath(fileIndex)
	}
	return r, nil
}

// infoResult is the .debug_info of a link, its abbreviations, fields and
// lists.
type infoResult struct {
	data, abbrev []byte
	fields       info.Fields
	unitOffset   uint64
	lists        *debugLists
}

// buildInfo builds .debug_info: the compile unit with a subprogram per
// procedure, its parameters, scopes and variables, and the types they
// use; strings go to str.
func (l *linker) buildInfo(file string, str *dwarf.StrTab) (r infoResult, err error) {
	m := l.m
	// .debug_info.
	lowHigh := func(lo, size uint64) []info.Attr {
		hi := info.Udata(size)
		if l.enc.Version < 4 {
			hi = info.Addr(lo + size)
		}
		return []info.Attr{{Name: dwarf.DW_AT_low_pc, Value: info.Addr(lo)}, {Name: dwarf.DW_AT_high_pc, Value: hi}}
	}
	cu := &info.DIE{Tag: dwarf.DW_TAG_compile_unit}
	if m.Producer != "" {
		cu.Attrs = append(cu.Attrs, info.Attr{Name: dwarf.DW_AT_producer, Value: info.String(m.Producer)})
	}
	if m.Language != 0 {
		cu.Attrs = append(cu.Attrs, info.Attr{Name: dwarf.DW_AT_language, Value: info.Udata(uint64(m.Language))})
	}
	cu.Attrs = append(cu.Attrs, info.Attr{Name: dwarf.DW_AT_name, Value: info.String(file)})
	if m.CompDir != "" {
		cu.Attrs = append(cu.Attrs, info.Attr{Name: dwarf.DW_AT_comp_dir, Value: info.String(m.CompDir)})
	}
	cu.Attrs = append(cu.Attrs, lowHigh(l.textStart, l.textEnd-l.textStart)...)
	cu.Attrs = append(cu.Attrs, info.Attr{Name: dwarf.DW_AT_stmt_list, Value: info.SecOffset(0)})

	// The language's integers: 64-bit signed, so debuggers print values.
	intType := &info.DIE{Tag: dwarf.DW_TAG_base_type, Attrs: []info.Attr{
		{Name: dwarf.DW_AT_name, Value: info.String("integer")},
		{Name: dwarf.DW_AT_encoding, Value: info.Udata(uint64(dwarf.DW_ATE_signed))},
		{Name: dwarf.DW_AT_byte_size, Value: info.Udata(8)},
	}}
	cu.Children = append(cu.Children, intType)
	types := newTypeWriter(l, cu, intType)
	frameBase := []byte{byte(dwarf.DW_OP_call_frame_cfa)}
	lists, err := newDebugLists(l.enc, l.textStart)
	if err != nil {
		return r, &LinkError{"module", err.Error()}
	}
	// .debug_info is encoded as it is built: each procedure's subtree is
	// built in the slab, encoded, and its memory reused for the next
	// (info.UnitWriter). The type entries (cu.Children, which the type
	// writer appends to) are kept: later procedures refer to them. The
	// entries come out in the order of a whole tree: the root, then for
	// each procedure the types it made first, then its subprogram.
	unit := &info.Unit{Enc: l.enc, Root: cu}
	// About 32 bytes per subprogram and 16 per parameter or variable.
	hint := 256
	for _, p := range m.Procs {
		hint += 32 + 16*len(p.Params)
	}
	uw, err := info.NewUnitWriter(unit, str, l.object, hint)
	if err != nil {
		return r, &LinkError{"module", fmt.Sprintf(".debug_info: %v", err)}
	}
	// encErr is the first error of the encoder: reported after every
	// procedure is checked, as when the whole tree was encoded at the end.
	var encErr error
	encodeBatch := func(b *infoBatch) {
		for _, it := range b.items {
			for _, t := range it.types {
				if encErr == nil {
					encErr = uw.Add(t, true)
				}
			}
			if encErr == nil {
				encErr = uw.Add(it.sp, false)
			}
			if encErr == nil {
				encErr = uw.Release()
			}
		}
	}
	// Procedures go to the encoder in batches, each built in a slab of
	// its own. On a large module the encoder runs on another goroutine
	// while the next batches are built; three batches circulate.
	pipelined := len(m.Procs) >= parallelProcs && runtime.GOMAXPROCS(0) > 1
	nBatches := 1
	if pipelined {
		nBatches = 3
	}
	free := make(chan *infoBatch, nBatches)
	for range nBatches {
		b, _ := batchScratch.get()
		if b == nil {
			b = &infoBatch{slab: &dieSlab{}}
		}
		free <- b
	}
	work := make(chan *infoBatch, nBatches)
	encoded := make(chan struct{})
	if pipelined {
		go func() {
			for b := range work {
				encodeBatch(b)
				free <- b
			}
			close(encoded)
		}()
	}
	// submit hands a full (or the last) batch to the encoder.
	submit := func(b *infoBatch) {
		if pipelined {
			work <- b
			return
		}
		encodeBatch(b)
		free <- b
	}
	// stop waits for the encoder to be done with every batch submitted.
	stop := func() {
		close(work)
		if pipelined {
			<-encoded
		}
	}
	var batch *infoBatch
	written := 0 // cu.Children handed to the encoder
	stopped := false
	defer func() {
		if !stopped { // an error of the model: the encoder still runs
			stop()
		}
	}()
	for i, p := range m.Procs {
		if batch == nil {
			batch = <-free
			batch.items = batch.items[:0]
			batch.slab.reset()
			l.slab = batch.slab
		}
		// Room for every attribute a subprogram gets, so that the
		// appends below do not grow the slice.
		sp := l.slab.die(dwarf.DW_TAG_subprogram)
		sp.Attrs = l.slab.attrList(subprogramAttrs)
		sp.Attrs = append(sp.Attrs, info.Attr{Name: dwarf.DW_AT_name, Value: info.String(p.Name)})
		if p.LinkName != "" {
			sp.Attrs = append(sp.Attrs, info.Attr{Name: dwarf.DW_AT_linkage_name, Value: info.String(p.LinkName)})
		}
		if p.Line > 0 {
			sp.Attrs = append(sp.Attrs,
				info.Attr{Name: dwarf.DW_AT_decl_file, Value: info.Udata(fileIndex)},
				info.Attr{Name: dwarf.DW_AT_decl_line, Value: info.Udata(uint64(p.Line))})
			if p.Column > 0 {
				sp.Attrs = append(sp.Attrs, info.Attr{Name: dwarf.DW_AT_decl_column, Value: info.Udata(uint64(p.Column))})
			}
		}
		switch {
		case p.Result != nil && p.Result.Kind != KindVoid:
			if err := types.check(p.Result, false); err != nil {
				return r, &LinkError{"proc " + p.Name, "Result: " + err.Error()}
			}
			if _, err := types.size(p.Result); err != nil {
				return r, &LinkError{"proc " + p.Name, "Result: " + err.Error()}
			}
			d, err := types.die(p.Result, nil)
			if err != nil {
				return r, &LinkError{"proc " + p.Name, "Result: " + err.Error()}
			}
			sp.Attrs = append(sp.Attrs, info.Attr{Name: dwarf.DW_AT_type, Value: info.Ref(d)})
		case p.Result == nil && !p.Internal:
			// Procedures of the language return its integers.
			sp.Attrs = append(sp.Attrs, info.Attr{Name: dwarf.DW_AT_type, Value: info.Ref(intType)})
		}
		if p.Internal {
			sp.Attrs = append(sp.Attrs, info.Attr{Name: dwarf.DW_AT_artificial, Value: info.Flag(true)})
		} else {
			sp.Attrs = append(sp.Attrs, info.Attr{Name: dwarf.DW_AT_external, Value: info.Flag(true)})
		}
		sp.Attrs = append(sp.Attrs, lowHigh(l.procAddr[i], uint64(len(p.Code)))...)
		sp.Attrs = append(sp.Attrs, info.Attr{Name: dwarf.DW_AT_frame_base, Value: info.Exprloc(frameBase)})
		if p.Doc != "" {
			// DWARF 5 section 2.20: a description of the entity.
			sp.Attrs = append(sp.Attrs, info.Attr{Name: dwarf.DW_AT_description, Value: info.String(p.Doc)})
		}
		if len(p.Properties) > 0 {
			var props strings.Builder
			for j, pr := range p.Properties {
				if j > 0 {
					props.WriteByte('\n')
				}
				props.WriteString(escapeProperty(pr.Name) + "=" + escapeProperty(pr.Value))
			}
			sp.Attrs = append(sp.Attrs, info.Attr{Name: dwarf.DW_AT_elfimage_properties, Value: info.String(props.String())})
		}
		params := &l.params
		params.reset()
		pv := &l.pv
		*pv = procVars{types: types, procAddr: l.procAddr[i], codeLen: uint32(len(p.Code)), lists: lists, scope: sp,
			env: l.env0[:1:1], pending: pv.pending[:0]}
		pv.env[0] = params
		sp.Children = l.slab.kidList(len(p.Params) + len(p.Scopes))
		for j := range p.Params {
			v := &p.Params[j]
			if _, dup := params.lookup(v.Name); dup {
				return r, &LinkError{"proc " + p.Name, fmt.Sprintf("parameter %s: the name is used twice", v.Name)}
			}
			param, err := l.varDIE(dwarf.DW_TAG_formal_parameter, v, pv)
			if err != nil {
				return r, &LinkError{"proc " + p.Name, "parameter " + err.Error()}
			}
			params.add(varEntry{param, v})
			sp.Children = append(sp.Children, param)
		}
		whole := []CodeRange{{0, uint32(len(p.Code))}}
		if err := checkSiblings(p.Scopes); err != nil {
			return r, &LinkError{"proc " + p.Name, err.Error()}
		}
		for _, sc := range p.Scopes {
			b, err := l.scopeDIE(sc, whole, pv)
			if err != nil {
				return r, &LinkError{"proc " + p.Name, err.Error()}
			}
			sp.Children = append(sp.Children, b)
		}
		if err := pv.resolveCounts(); err != nil {
			return r, &LinkError{"proc " + p.Name, err.Error()}
		}
		// The types this procedure made first (cu.Children only grows:
		// the items keep views of arrays that are not written again).
		batch.items = append(batch.items, infoItem{types: cu.Children[written:len(cu.Children):len(cu.Children)], sp: sp})
		written = len(cu.Children)
		if len(batch.items) == infoBatchSize {
			submit(batch)
			batch = nil
		}
	}
	if batch != nil {
		submit(batch)
	}
	stop()
	stopped = true
	// Every batch is back: they are kept for the next link.
	l.slab = nil
	for range nBatches {
		b := <-free
		b.items = b.items[:0]
		batchScratch.put(b)
	}
	if encErr != nil {
		return r, &LinkError{"module", fmt.Sprintf(".debug_info: %v", encErr)}
	}
	r.data, r.abbrev, r.fields, err = uw.Finish()
	if err != nil {
		return r, &LinkError{"module", fmt.Sprintf(".debug_info: %v", err)}
	}
	r.unitOffset, r.lists = unit.Offset, lists
	return r, nil
}

// buildProcTable builds the procedure table (package meta) once the
// line program says where each procedure's sequence is.
func (l *linker) buildProcTable(lr *lineResult) ([]byte, error) {
	// The runtime's own table: arity, names, docstrings, properties and
	// each procedure's line sequence, queried without parsing DWARF.
	m := l.m
	var strs dieSlab // not the linker's: this runs beside the .debug_info builder
	procs := getProcs(len(m.Procs))
	defer putProcs(procs)
	// The position index: each procedure's rows, in one array.
	var rows []meta.Row
	index := lr.hasPath && writePositionIndex
	if index {
		n := 0
		for _, p := range m.Procs {
			n += len(p.Lines)
		}
		if pr, ok := posRowsScratch.get(); ok && cap(pr) >= n {
			rows = pr[:0]
		} else {
			rows = make([]meta.Row, 0, n)
		}
		defer func() { posRowsScratch.put(rows[:0]) }()
	}
	for i, p := range m.Procs {
		mp := meta.Proc{Name: p.Name, Start: l.procAddr[i], Size: uint64(len(p.Code)), Doc: p.Doc, Args: strs.strList(len(p.Params))}
		for _, v := range p.Params {
			mp.Args = append(mp.Args, v.Name)
			if v.Optional {
				mp.Optional++
				mp.Defaults = append(mp.Defaults, v.Default)
			} else {
				if mp.Optional > 0 {
					return nil, &LinkError{"proc " + p.Name, fmt.Sprintf("required parameter %s after an optional one", v.Name)}
				}
				mp.Required++
			}
		}
		for _, pr := range p.Properties {
			mp.Props = append(mp.Props, meta.Prop{Name: pr.Name, Value: pr.Value})
		}
		if lr.seqOf[i] >= 0 {
			mp.LineSeq, mp.HasLineSeq = lr.seqOffsets[lr.seqOf[i]], true
			if index {
				at := len(rows)
				for _, r := range p.Lines {
					rows = append(rows, meta.Row{Offset: uint64(r.Offset), Line: r.Line, Column: r.Column})
				}
				mp.File, mp.Rows = lr.filePath, rows[at:len(rows):len(rows)]
			}
		}
		procs[i] = mp
	}
	table, err := meta.Encode(procs)
	if err != nil {
		return nil, &LinkError{"module", fmt.Sprintf("%s: %v", meta.SectionProcs, err)}
	}
	return table, nil
}

// writePositionIndex is whether Link writes the procedure table's
// position index (meta.FlagPositions); tests clear it to link an image as
// Link wrote them before the index.
var writePositionIndex = true

// getProcs returns n zero records for buildProcTable, from procsScratch
// when a record array of the last links is there (1.5 MB for 10,000
// procedures: the largest allocation of a link after the output).
func getProcs(n int) []meta.Proc {
	if p, ok := procsScratch.get(); ok && cap(p) >= n {
		return p[:n]
	}
	return make([]meta.Proc, n)
}

// putProcs zeroes procs (no model string stays referenced) and keeps it
// for the next link.
func putProcs(procs []meta.Proc) {
	clear(procs)
	procsScratch.put(procs)
}

// infoItem is one procedure's part of .debug_info: the type entries it
// made first (kept) and its subprogram's subtree (in the batch's slab).
type infoItem struct {
	types []*info.DIE
	sp    *info.DIE
}

// infoBatch is procedures built in one slab, handed to the encoder
// together; the slab is reused once they are encoded.
type infoBatch struct {
	items []infoItem
	slab  *dieSlab
}

// batchScratch, rowsScratch, procsScratch and posRowsScratch keep the
// batches' slabs, the line rows' array, the procedure records and the
// position index's rows of a link for the next
// one, so that a process linking repeatedly (a JIT, a build) does not
// allocate, zero and collect them every time. A kept slab still points
// at the last module's strings until it is reused or dropped (within two
// collections: see scratch).
var (
	batchScratch scratch[*infoBatch]
	rowsScratch  scratch[[]line.Row]
	procsScratch scratch[[]meta.Proc] // zeroed
	// posRowsScratch keeps the position index's rows (numbers only).
	posRowsScratch scratch[[]meta.Row]
)

// infoBatchSize is the number of procedures of a batch.
const infoBatchSize = 128

// parallelProcs is the procedure count from which Link builds the line
// program and procedure table beside .debug_info, and encodes
// .debug_info beside building it, on other cores (a variable for the
// tests that compare both ways).
var parallelProcs = 512

// fileIndex is the line program's file entry of the module's source
// (entries 0 and 1 both name it).
const fileIndex = 1

// procVars is what building the variables of one procedure needs: the
// unit's types, the procedure's code, the unit's lists, the entry of the
// scope being built (the subprogram or a lexical block), the variables
// visible so far (parameters, then each enclosing scope's) and the
// variable-length arrays whose length variable is found once the
// procedure's variables all exist.
type procVars struct {
	types    *typeWriter
	procAddr uint64
	codeLen  uint32
	lists    *debugLists
	scope    *info.DIE
	env      []*varScope
	pending  []pendingCount
}

// varScope is the variables of one scope by name: a list searched in
// order while it is short, with a map beside it once it is longer (a
// procedure's two parameters need no map).
type varScope struct {
	list   []varEntry
	byName map[string]int
}

// varScopeMap is the length from which a varScope keeps a map.
const varScopeMap = 16

func (s *varScope) lookup(name string) (varEntry, bool) {
	if s.byName != nil {
		i, ok := s.byName[name]
		if !ok {
			return varEntry{}, false
		}
		return s.list[i], true
	}
	for _, e := range s.list {
		if e.v.Name == name {
			return e, true
		}
	}
	return varEntry{}, false
}

// add adds e, whose name lookup did not find.
func (s *varScope) add(e varEntry) {
	s.list = append(s.list, e)
	switch {
	case s.byName != nil:
		s.byName[e.v.Name] = len(s.list) - 1
	case len(s.list) >= varScopeMap:
		s.byName = make(map[string]int, 2*len(s.list))
		for i, e := range s.list {
			s.byName[e.v.Name] = i
		}
	}
}

// reset empties s for the next procedure, keeping its list's array.
func (s *varScope) reset() {
	clear(s.list)
	s.list, s.byName = s.list[:0], nil
}

// varEntry is a variable of the model (a pointer into the module, which
// Link does not change: a copy of the Var in every map entry made each
// procedure's parameter map cost a kilobyte) and its entry.
type varEntry struct {
	die *info.DIE
	v   *Var
}

// pendingCount is a variable whose type is an array of v.Type.CountVar
// elements, resolved among the variables visible in env; scope is the
// entry of the scope that declares it.
type pendingCount struct {
	die   *info.DIE
	kind  string // "parameter" or "variable"
	v     *Var
	env   []*varScope
	scope *info.DIE
}

// CountPrefix starts the name of the artificial variable Link declares
// beside a variable-length array (Type.CountVar): DW_AT_count refers to
// "__vla_count_N", a DW_TAG_variable with the value of N, as clang
// declares "__vla_expr0". lldb takes an array's length only from a
// DW_TAG_variable (not a parameter), and gdb reads a referenced variable
// in a register as if it held an address; the artificial variable is a
// variable, and in a register it is the register's value
// (DW_OP_bregN 0, DW_OP_stack_value), which both read right.
const countPrefix = "__vla_count_"

// resolveCounts gives each variable-length array its DW_AT_count: a
// reference to an artificial variable holding the value of its length
// variable (the innermost visible one of that name), declared in the
// array variable's scope, one per length variable and scope.
func (pv *procVars) resolveCounts() error {
	type key struct{ count, scope *info.DIE }
	made := map[key]*info.DIE{}
	for _, pc := range pv.pending {
		var count varEntry
		for i := len(pc.env) - 1; i >= 0 && count.die == nil; i-- {
			count, _ = pc.env[i].lookup(pc.v.Type.CountVar)
		}
		if count.die == nil || count.die == pc.die {
			return fmt.Errorf("%s %s: type %s: CountVar %s names no other parameter or variable visible there", pc.kind, pc.v.Name, pc.v.Type, pc.v.Type.CountVar)
		}
		if u := count.v.Type; u != nil {
			if u = value.Under(u); u == nil || (u.Kind != KindSigned && u.Kind != KindUnsigned) {
				return fmt.Errorf("%s %s: type %s: CountVar %s is of type %s, not an integer", pc.kind, pc.v.Name, pc.v.Type, pc.v.Type.CountVar, count.v.Type)
			}
		}
		k := key{count.die, pc.scope}
		art := made[k]
		if art == nil {
			var err error
			if art, err = pv.countVar(count.v); err != nil {
				return fmt.Errorf("%s %s: %v", pc.kind, pc.v.Name, err)
			}
			made[k] = art
			pc.scope.Children = append(pc.scope.Children, art)
		}
		a, err := pv.types.typeAttr(pc.v.Type, art)
		if err != nil {
			return fmt.Errorf("%s %s: %v", pc.kind, pc.v.Name, err)
		}
		pc.die.Attrs = append(pc.die.Attrs, a)
	}
	return nil
}

// countVar builds the artificial variable that holds the value of the
// length variable v (see countPrefix).
func (pv *procVars) countVar(v *Var) (*info.DIE, error) {
	d := &info.DIE{Tag: dwarf.DW_TAG_variable, Attrs: []info.Attr{
		{Name: dwarf.DW_AT_name, Value: info.String(countPrefix + v.Name)},
	}}
	t, err := pv.types.typeAttr(v.Type, nil)
	if err != nil {
		return nil, err
	}
	d.Attrs = append(d.Attrs, t, info.Attr{Name: dwarf.DW_AT_artificial, Value: info.Flag(true)})
	switch {
	case len(v.Live) > 0:
		live := make([]LiveRange, len(v.Live))
		for i, r := range v.Live {
			live[i] = LiveRange{r.Start, r.End, valueOf(r.Location)}
		}
		val, err := pv.lists.locList(pv.procAddr, live)
		if err != nil {
			return nil, err
		}
		d.Attrs = append(d.Attrs, info.Attr{Name: dwarf.DW_AT_location, Value: val})
	case len(v.Location) > 0:
		d.Attrs = append(d.Attrs, info.Attr{Name: dwarf.DW_AT_location, Value: info.Exprloc(valueOf(v.Location))})
	}
	return d, nil
}

// valueOf turns a register location (DW_OP_reg*, DW_OP_regx) into the
// register's value (DW_OP_breg* 0, DW_OP_stack_value); other locations
// are kept.
func valueOf(loc []byte) []byte {
	ops, err := expr.Decode(loc, expr.Params{AddrSize: 8})
	if err != nil || len(ops) != 1 {
		return loc
	}
	if r, ok := ops[0].Reg(); ok && (ops[0].Op == dwarf.DW_OP_regx || ops[0].Op >= dwarf.DW_OP_reg0 && ops[0].Op <= dwarf.DW_OP_reg31) {
		return expr.Breg(r, 0).StackValue()
	}
	return loc
}

// varDIE builds the DIE of a parameter or variable: name, declaration
// position, type, default for optional parameters, and location: a
// location list when the model gives exact live ranges, else one
// expression. Errors start with the variable's name.
func (l *linker) varDIE(tag dwarf.Tag, v *Var, pv *procVars) (*info.DIE, error) {
	kind := "parameter"
	if tag == dwarf.DW_TAG_variable {
		kind = "variable"
	}
	if v.Name == "" {
		return nil, fmt.Errorf("with no name")
	}
	if err := l.checkExpr(v.Location); err != nil {
		return nil, fmt.Errorf("%s: Location: %v", v.Name, err)
	}
	d := l.slab.die(tag)
	d.Attrs = append(l.slab.attrList(variableAttrs), info.Attr{Name: dwarf.DW_AT_name, Value: info.String(v.Name)})
	if v.Line > 0 {
		d.Attrs = append(d.Attrs,
			info.Attr{Name: dwarf.DW_AT_decl_file, Value: info.Udata(1)},
			info.Attr{Name: dwarf.DW_AT_decl_line, Value: info.Udata(uint64(v.Line))})
		if v.Column > 0 {
			d.Attrs = append(d.Attrs, info.Attr{Name: dwarf.DW_AT_decl_column, Value: info.Udata(uint64(v.Column))})
		}
	}
	if v.Type != nil && v.Type.Kind == KindArray && v.Type.CountVar != "" {
		if err := pv.types.check(v.Type, true); err != nil {
			return nil, fmt.Errorf("%s: %v", v.Name, err)
		}
		pv.pending = append(pv.pending, pendingCount{die: d, kind: kind, v: v, env: pv.env, scope: pv.scope})
	} else {
		a, err := pv.types.typeAttr(v.Type, nil)
		if err != nil {
			return nil, fmt.Errorf("%s: %v", v.Name, err)
		}
		d.Attrs = append(d.Attrs, a)
	}
	if v.Optional {
		// DWARF 5 section 4.1: a flag-class DW_AT_default_value says the
		// parameter has a default (earlier versions have no flag class
		// for it); the expression's source goes in our vendor attribute.
		if l.enc.Version >= 5 {
			d.Attrs = append(d.Attrs, info.Attr{Name: dwarf.DW_AT_default_value, Value: info.Flag(true)})
		}
		if v.Default != "" || l.enc.Version < 5 {
			d.Attrs = append(d.Attrs, info.Attr{Name: dwarf.DW_AT_elfimage_default_source, Value: info.String(v.Default)})
		}
	}
	switch {
	case len(v.Live) > 0:
		ranges := make([]CodeRange, len(v.Live))
		for i, r := range v.Live {
			ranges[i] = CodeRange{r.Start, r.End}
			if len(r.Location) == 0 {
				return nil, fmt.Errorf("%s: live range %d has no location", v.Name, i)
			}
			if err := l.checkExpr(r.Location); err != nil {
				return nil, fmt.Errorf("%s: live range %d: Location: %v", v.Name, i, err)
			}
		}
		if err := checkRanges(ranges, pv.codeLen); err != nil {
			return nil, fmt.Errorf("%s: live %v", v.Name, err)
		}
		val, err := pv.lists.locList(pv.procAddr, v.Live)
		if err != nil {
			return nil, fmt.Errorf("%s: %v", v.Name, err)
		}
		d.Attrs = append(d.Attrs, info.Attr{Name: dwarf.DW_AT_location, Value: val})
	case len(v.Location) > 0:
		d.Attrs = append(d.Attrs, info.Attr{Name: dwarf.DW_AT_location, Value: info.Exprloc(v.Location)})
	}
	return d, nil
}

// scopeDIE builds the DW_TAG_lexical_block of a scope with its variables
// and nested scopes; a scope in several pieces gets DW_AT_ranges.
func (l *linker) scopeDIE(sc *Scope, parent []CodeRange, pv *procVars) (*info.DIE, error) {
	if sc == nil {
		return nil, fmt.Errorf("scope is nil")
	}
	if len(sc.Ranges) == 0 {
		return nil, fmt.Errorf("scope without code ranges")
	}
	if err := checkRanges(sc.Ranges, pv.codeLen); err != nil {
		return nil, fmt.Errorf("scope %s: %v", rangesString(sc.Ranges), err)
	}
	// DWARF 5 section 3.5: a block's code lies within its parent's.
	for _, r := range sc.Ranges {
		inside := false
		for _, p := range parent {
			inside = inside || (r.Start >= p.Start && r.End <= p.End)
		}
		if !inside {
			return nil, fmt.Errorf("scope range [%#x, %#x) is not inside its enclosing scope %s", r.Start, r.End, rangesString(parent))
		}
	}
	if err := checkSiblings(sc.Scopes); err != nil {
		return nil, err
	}
	b := &info.DIE{Tag: dwarf.DW_TAG_lexical_block}
	if len(sc.Ranges) == 1 {
		r := sc.Ranges[0]
		lo := pv.procAddr + uint64(r.Start)
		hi := info.Udata(uint64(r.End - r.Start))
		if l.enc.Version < 4 {
			hi = info.Addr(pv.procAddr + uint64(r.End))
		}
		b.Attrs = append(b.Attrs, info.Attr{Name: dwarf.DW_AT_low_pc, Value: info.Addr(lo)}, info.Attr{Name: dwarf.DW_AT_high_pc, Value: hi})
	} else {
		val, err := pv.lists.rangeList(pv.procAddr, sc.Ranges)
		if err != nil {
			return nil, err
		}
		b.Attrs = append(b.Attrs, info.Attr{Name: dwarf.DW_AT_ranges, Value: val})
	}
	vars := &varScope{}
	outer, outerScope := pv.env, pv.scope
	pv.env = append(outer[:len(outer):len(outer)], vars)
	pv.scope = b
	defer func() { pv.env, pv.scope = outer, outerScope }()
	for j := range sc.Vars {
		v := &sc.Vars[j]
		if _, dup := vars.lookup(v.Name); dup {
			return nil, fmt.Errorf("scope %s: variable %s: the name is used twice in the scope", rangesString(sc.Ranges), v.Name)
		}
		d, err := l.varDIE(dwarf.DW_TAG_variable, v, pv)
		if err != nil {
			return nil, fmt.Errorf("scope %s: variable %v", rangesString(sc.Ranges), err)
		}
		vars.add(varEntry{d, v})
		b.Children = append(b.Children, d)
	}
	for _, inner := range sc.Scopes {
		d, err := l.scopeDIE(inner, sc.Ranges, pv)
		if err != nil {
			return nil, err
		}
		b.Children = append(b.Children, d)
	}
	return b, nil
}

// checkSiblings checks that sibling scopes do not share code: each
// instruction is in at most one block of a level (DWARF 5 section 3.5).
func checkSiblings(scopes []*Scope) error {
	for i, a := range scopes {
		for _, b := range scopes[:i] {
			if a == nil || b == nil {
				continue
			}
			for _, ra := range a.Ranges {
				for _, rb := range b.Ranges {
					if ra.Start < rb.End && rb.Start < ra.End {
						return fmt.Errorf("scope %s overlaps its sibling scope %s", rangesString(a.Ranges), rangesString(b.Ranges))
					}
				}
			}
		}
	}
	return nil
}

// rangesString formats code ranges as "[0x1, 0x5)" or "[0x1, 0x5) [0x8, 0x9)".
func rangesString(rs []CodeRange) string {
	var parts []string
	for _, r := range rs {
		parts = append(parts, fmt.Sprintf("[%#x, %#x)", r.Start, r.End))
	}
	return strings.Join(parts, " ")
}

// escapeProperty escapes a property name or value for
// DW_AT_elfimage_properties.
func escapeProperty(s string) string {
	return strings.NewReplacer(`\`, `\\`, "=", `\=`, "\n", `\n`).Replace(s)
}

// checkRanges checks that code ranges are non-empty, sorted, disjoint and
// inside the code.
func checkRanges(rs []CodeRange, codeLen uint32) error {
	for i, r := range rs {
		if r.Start >= r.End || r.End > codeLen {
			return fmt.Errorf("range %d [%#x, %#x) is empty or outside the code (%#x bytes)", i, r.Start, r.End, codeLen)
		}
		if i > 0 && r.Start < rs[i-1].End {
			return fmt.Errorf("range %d [%#x, %#x) overlaps or precedes the one before", i, r.Start, r.End)
		}
	}
	return nil
}

// debugLists collects the location and range lists of a unit
// (.debug_loclists and .debug_rnglists in DWARF 5, .debug_loc and
// .debug_ranges before) through package loc.
type debugLists struct {
	locs *loc.LocLists
	rngs *loc.RangeLists
	used struct{ locs, rngs bool }
}

func newDebugLists(enc dwarf.Encoding, cuBase uint64) (*debugLists, error) {
	locs, err := loc.NewLocLists(enc, cuBase)
	if err != nil {
		return nil, err
	}
	rngs, err := loc.NewRangeLists(enc, cuBase)
	if err != nil {
		return nil, err
	}
	return &debugLists{locs: locs, rngs: rngs}, nil
}

// locList adds a location list for live ranges of a procedure at procAddr
// and returns the attribute value that refers to it.
func (d *debugLists) locList(procAddr uint64, live []LiveRange) (info.Value, error) {
	entries := make([]loc.Entry, len(live))
	for i, r := range live {
		entries[i] = loc.Entry{Start: procAddr + uint64(r.Start), End: procAddr + uint64(r.End), Expr: r.Location}
	}
	off, err := d.locs.AddList(entries)
	if err != nil {
		return info.Value{}, err
	}
	d.used.locs = true
	return info.SecOffset(off), nil
}

// rangeList adds a range list for code ranges of a procedure at procAddr.
func (d *debugLists) rangeList(procAddr uint64, ranges []CodeRange) (info.Value, error) {
	rs := make([]loc.Range, len(ranges))
	for i, r := range ranges {
		rs[i] = loc.Range{Start: procAddr + uint64(r.Start), End: procAddr + uint64(r.End)}
	}
	off, err := d.rngs.AddList(rs)
	if err != nil {
		return info.Value{}, err
	}
	d.used.rngs = true
	return info.SecOffset(off), nil
}

// appendSections appends the list sections that hold lists to secs.
func (d *debugLists) appendSections(secs []builtSection) []builtSection {
	if d.used.locs {
		s := debugSection(d.locs.Section(), d.locs.Bytes(), false)
		s.addrs = d.locs.AddrOffsets()
		secs = append(secs, s)
	}
	if d.used.rngs {
		s := debugSection(d.rngs.Section(), d.rngs.Bytes(), false)
		s.addrs = d.rngs.AddrOffsets()
		secs = append(secs, s)
	}
	return secs
}

// dieSlab hands out the DIEs, attribute lists and child lists of a batch
// of procedures' subtrees from chunks, reused for the next batch once the
// subtrees are encoded (reset), so that building a subtree allocates
// nothing in the steady state; it also hands out the procedure table's
// string lists. Nothing handed out moves: a full chunk is left as it is
// and another started. Lists are returned with their capacity capped, so
// that appending past it reallocates instead of writing into the next
// list.
type dieSlab struct {
	dies  chunks[info.DIE]
	attrs chunks[info.Attr]
	kids  chunks[*info.DIE]
	strs  chunks[string]
}

const slabChunk = 1024

// The most attributes buildInfo gives a subprogram (name, linkage name,
// declaration file, line and column, type, artificial or external, low
// and high pc, frame base, description, properties) and a parameter or
// variable (name, declaration file, line and column, type, default flag
// and source, location): their lists are handed out at this capacity, as
// the slab is reused.
const (
	subprogramAttrs = 12
	variableAttrs   = 8
)

// chunks hands out runs of Ts from arrays of slabChunk, keeping the
// arrays for reuse after reset.
type chunks[T any] struct {
	cur  []T
	used [][]T // full arrays handed out since the last reset
	free [][]T // arrays to reuse
}

// next returns an empty list of capacity n that stays where it is.
func (c *chunks[T]) next(n int) []T {
	if n > slabChunk/4 {
		return make([]T, 0, n)
	}
	if cap(c.cur)-len(c.cur) < n {
		if c.cur != nil {
			c.used = append(c.used, c.cur)
		}
		if k := len(c.free); k > 0 {
			c.cur, c.free = c.free[k-1][:0], c.free[:k-1]
		} else {
			c.cur = make([]T, 0, slabChunk)
		}
	}
	l := len(c.cur)
	c.cur = c.cur[:l+n]
	return c.cur[l : l : l+n]
}

// reset makes every array available again. What was handed out is no
// longer used; it is not cleared (the next user overwrites what it
// takes, and until then the arrays keep what they point to alive).
func (c *chunks[T]) reset() {
	c.free = append(c.free, c.used...)
	clear(c.used)
	c.used = c.used[:0]
	c.cur = c.cur[:0]
}

// reset hands out the DIEs, attribute and child lists again from the
// start; string lists are kept.
func (s *dieSlab) reset() {
	s.dies.reset()
	s.attrs.reset()
	s.kids.reset()
}

func (s *dieSlab) die(tag dwarf.Tag) *info.DIE {
	d := s.dies.next(1)[:1]
	d[0] = info.DIE{Tag: tag}
	return &d[0]
}

// attrList returns an empty attribute list of capacity n.
func (s *dieSlab) attrList(n int) []info.Attr { return s.attrs.next(n) }

// kidList returns an empty child list of capacity n.
func (s *dieSlab) kidList(n int) []*info.DIE {
	if n == 0 {
		return nil
	}
	return s.kids.next(n)
}

// strList returns an empty string list of capacity n.
func (s *dieSlab) strList(n int) []string {
	if n == 0 {
		return nil
	}
	return s.strs.next(n)
}
