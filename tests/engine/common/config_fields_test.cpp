// Declared config fields: reading with defaults and checks, writing, the docs kvbench list
// shows; an added field leaves configs stored before it unchanged.
#include "engine/common/config_fields.h"

#include <gtest/gtest.h>

namespace kvb {
namespace {

struct Toy {
  int window = 8;
  int keys = 1;  // added later
  static const ConfigFields<Toy>& fields() {
    static const auto f = ConfigFields<Toy>()
                              .field("window", &Toy::window, "window", check::at_least(1))
                              .added_field("keys", &Toy::keys, "keys", check::at_least(1));
    return f;
  }
};

TEST(ConfigFields, AnAddedFieldIsWrittenOnlyAwayFromItsDefault) {
  const auto& f = Toy::fields();
  EXPECT_EQ(f.write(f.read(json::object(), "t")), (json{{"window", 8}}));
  EXPECT_EQ(f.write(f.read({{"keys", 1}}, "t")), (json{{"window", 8}}));
  EXPECT_EQ(f.write(f.read({{"keys", 3}}, "t")), (json{{"window", 8}, {"keys", 3}}));
  EXPECT_THROW(f.read({{"keys", 0}}, "t"), InputError);
  EXPECT_THROW(f.read({{"keys", "3"}}, "t"), InputError);
  const std::vector<FieldDoc> docs = f.docs();
  ASSERT_EQ(docs.size(), 2u);
  EXPECT_EQ(docs[1].name, "keys");
  EXPECT_EQ(docs[1].default_value, "1");
  EXPECT_EQ(docs[0].default_value, "8");
}

// A field another one makes unused: set away from its default there, it is refused (the run
// would ignore it); at its default, or where it is used, it passes; a member struct's rule
// holds in the config that includes it; kvbench list says when it is unused.
struct Pooled {
  int kernel = 7;
  std::string pooling = "max";
  static const ConfigFields<Pooled>& fields() {
    static const auto f =
        ConfigFields<Pooled>()
            .field("kernel", &Pooled::kernel, "kernel")
            .field("pooling", &Pooled::pooling, "pooling")
            .unused_when("pooling", [](const Pooled& p) { return p.kernel == 1; }, "kernel is 1");
    return f;
  }
};
struct Outer {
  Pooled pooled;
  static const ConfigFields<Outer>& fields() {
    static const auto f = ConfigFields<Outer>().fields_of(&Outer::pooled, Pooled::fields());
    return f;
  }
};

template <typename C>
std::string unused_error(const json& j) {
  try {
    C::fields().refuse_unused(C::fields().read(j, "f.json: $.config"), "f.json: $.config");
  } catch (const InputError& e) {
    return e.what();
  }
  return "";
}

TEST(ConfigFields, AFieldSetWhereItIsUnusedIsRefused) {
  EXPECT_EQ(unused_error<Pooled>({{"kernel", 1}, {"pooling", "avg"}}),
            "f.json: $.config.pooling: \"avg\" is set, but nothing reads it when kernel is 1"
            "; leave it at its default, \"max\"");
  EXPECT_EQ(unused_error<Pooled>({{"kernel", 1}, {"pooling", "max"}}), "");
  EXPECT_EQ(unused_error<Pooled>({{"kernel", 3}, {"pooling", "avg"}}), "");
  EXPECT_NE(unused_error<Outer>({{"kernel", 1}, {"pooling", "avg"}}).find("$.config.pooling"),
            std::string::npos);
  EXPECT_EQ(unused_error<Outer>({{"kernel", 5}, {"pooling", "avg"}}), "");
  EXPECT_EQ(Outer::fields().docs()[1].doc, "pooling [unused when kernel is 1]");
}

}  // namespace
}  // namespace kvb
