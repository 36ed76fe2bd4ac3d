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

}  // namespace
}  // namespace kvb
