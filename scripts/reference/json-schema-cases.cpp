// Prints, as JSON, the reference's own JSON-schema conversion cases (the
// `test({...})` list of its tests/test-json-schema-to-grammar.cpp) with the
// grammar the reference's json_schema_to_grammar gives each, or its error.
// The reference test file is included as it is, its main renamed, so the case
// list is read from the source rather than copied into lamina.
//
// Built by scripts/reference/json-schema-goldens.sh; not part of lamina.
#define main reference_json_schema_tests_main
#include "test-json-schema-to-grammar.cpp"
#undef main

#include <cstdio>
#include <string>

static std::string json_string(const std::string & s) {
    std::string out = "\"";
    for (unsigned char c : s) {
        switch (c) {
            case '"': out += "\\\""; break;
            case '\\': out += "\\\\"; break;
            case '\n': out += "\\n"; break;
            case '\r': out += "\\r"; break;
            case '\t': out += "\\t"; break;
            default:
                if (c < 0x20) {
                    char buf[8];
                    snprintf(buf, sizeof buf, "\\u%04x", c);
                    out += buf;
                } else {
                    out += (char) c;
                }
        }
    }
    return out + "\"";
}

int main() {
    bool first = true;
    printf("[\n");
    test_all("harvest", [&](const TestCase & tc) {
        std::string grammar, error;
        try {
            grammar = json_schema_to_grammar(common_json::parse(tc.schema), true);
        } catch (const std::exception & ex) {
            error = ex.what();
        }
        printf("%s{\"name\": %s, \"expected\": %s, \"schema\": %s, ",
               first ? "" : ",\n", json_string(tc.name).c_str(),
               tc.expected_status == SUCCESS ? "\"success\"" : "\"failure\"",
               json_string(tc.schema).c_str());
        if (error.empty()) {
            printf("\"grammar\": %s}", json_string(grammar).c_str());
        } else {
            printf("\"error\": %s}", json_string(error).c_str());
        }
        first = false;
    });
    printf("\n]\n");
    return 0;
}
