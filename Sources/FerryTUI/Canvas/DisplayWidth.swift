/// Terminal column widths, from our own table: `swift test` runs in the C locale, where libc's
/// wcwidth answers -1 for every non-ASCII character, so layout cannot ask libc.
public enum DisplayWidth {
    /// 0 for combining marks and zero-width format characters, 2 for East Asian wide/fullwidth and
    /// emoji presentation, 1 otherwise. Controls count 1 (the canvas draws them as U+FFFD).
    public static func of(_ scalar: Unicode.Scalar) -> Int {
        let v = scalar.value
        if v < 0x300 { return 1 }
        switch scalar.properties.generalCategory {
        case .nonspacingMark, .enclosingMark: return 0
        case .format where v != 0x00AD: return 0
        default: break
        }
        if v == 0x200B { return 0 }
        return isWide(v) ? 2 : 1
    }

    /// The width of a grapheme cluster: that of its first scalar (combining marks ride along),
    /// or 2 when it asks for emoji presentation (U+FE0F).
    public static func of(_ character: Character) -> Int {
        if character.isASCII { return 1 }
        let scalars = character.unicodeScalars
        guard let first = scalars.first else { return 0 }
        let base = of(first)
        if base == 1, scalars.count > 1, scalars.contains("\u{FE0F}") { return 2 }
        return base
    }

    public static func of(_ text: String) -> Int {
        if text.utf8.allSatisfy({ $0 >= 0x20 && $0 < 0x7F }) { return text.utf8.count }
        var total = 0
        for c in text { total += of(c) }
        return total
    }

    /// Text cut to at most `width` columns; an ellipsis marks the cut when `ellipsis` is given.
    public static func truncate(_ text: String, to width: Int, ellipsis: String? = "…") -> String {
        guard width > 0 else { return "" }
        if of(text) <= width { return text }
        let mark = ellipsis ?? ""
        let room = width - of(mark)
        guard room >= 0 else { return String(repeating: ".", count: width) }
        var out = ""
        var used = 0
        for c in text {
            let w = of(c)
            if used + w > room { break }
            out.append(c)
            used += w
        }
        return out + mark
    }

    /// Pads with spaces (on the right, or the left when `alignRight`) to exactly `width` columns, cutting if longer.
    public static func pad(_ text: String, to width: Int, alignRight: Bool = false, ellipsis: String? = "…") -> String {
        let cut = truncate(text, to: width, ellipsis: ellipsis)
        let gap = max(0, width - of(cut))
        let spaces = String(repeating: " ", count: gap)
        return alignRight ? spaces + cut : cut + spaces
    }

    /// East Asian Wide (W) and Fullwidth (F) ranges plus the emoji blocks, as terminals draw them.
    static func isWide(_ v: UInt32) -> Bool {
        switch v {
        case 0x1100...0x115F, 0x231A...0x231B, 0x2329...0x232A, 0x23E9...0x23EC, 0x23F0, 0x23F3,
             0x25FD...0x25FE, 0x2614...0x2615, 0x2648...0x2653, 0x267F, 0x2693, 0x26A1, 0x26AA...0x26AB,
             0x26BD...0x26BE, 0x26C4...0x26C5, 0x26CE, 0x26D4, 0x26EA, 0x26F2...0x26F3, 0x26F5, 0x26FA, 0x26FD,
             0x2705, 0x270A...0x270B, 0x2728, 0x274C, 0x274E, 0x2753...0x2755, 0x2757, 0x2795...0x2797,
             0x27B0, 0x27BF, 0x2B1B...0x2B1C, 0x2B50, 0x2B55,
             0x2E80...0x303E, 0x3041...0x33FF, 0x3400...0x4DBF, 0x4E00...0x9FFF, 0xA000...0xA4CF,
             0xA960...0xA97F, 0xAC00...0xD7A3, 0xF900...0xFAFF, 0xFE10...0xFE19, 0xFE30...0xFE6F,
             0xFF00...0xFF60, 0xFFE0...0xFFE6,
             0x16FE0...0x16FE4, 0x17000...0x18CFF, 0x1B000...0x1B2FF, 0x1F004, 0x1F0CF, 0x1F18E,
             0x1F191...0x1F19A, 0x1F200...0x1F251, 0x1F300...0x1F320, 0x1F32D...0x1F335, 0x1F337...0x1F37C,
             0x1F37E...0x1F393, 0x1F3A0...0x1F3CA, 0x1F3CF...0x1F3D3, 0x1F3E0...0x1F3F0, 0x1F3F4,
             0x1F3F8...0x1F43E, 0x1F440, 0x1F442...0x1F4FC, 0x1F4FF...0x1F53D, 0x1F54B...0x1F54E,
             0x1F550...0x1F567, 0x1F57A, 0x1F595...0x1F596, 0x1F5A4, 0x1F5FB...0x1F64F, 0x1F680...0x1F6C5,
             0x1F6CC, 0x1F6D0...0x1F6D2, 0x1F6D5...0x1F6D7, 0x1F6EB...0x1F6EC, 0x1F6F4...0x1F6FC,
             0x1F7E0...0x1F7EB, 0x1F90C...0x1F93A, 0x1F93C...0x1F945, 0x1F947...0x1F9FF,
             0x1FA70...0x1FAFF, 0x20000...0x2FFFD, 0x30000...0x3FFFD:
            return true
        default:
            return false
        }
    }
}
